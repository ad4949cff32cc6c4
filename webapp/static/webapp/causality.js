// The live causality page: draws the regions (and Saturn's serializer tree) from the layout the
// page carries, then, for every frame the server sends (one a second, server-sent events), moves
// a dot per remote update made visible along the path from its origin, and fills the table.
(function () {
  "use strict";

  var layout = JSON.parse(document.getElementById("tree-layout").textContent);
  var svg = document.getElementById("tree");
  var status = document.getElementById("live-status");
  var NS = "http://www.w3.org/2000/svg";
  var W = 1000, H = 460, MAX_DOTS = 6;
  var where = {};

  function make(tag, attributes, parent) {
    var element = document.createElementNS(NS, tag);
    Object.keys(attributes).forEach(function (k) { element.setAttribute(k, attributes[k]); });
    (parent || svg).appendChild(element);
    return element;
  }

  function hue(name) {
    var h = 0;
    for (var i = 0; i < name.length; i++) { h = (h * 31 + name.charCodeAt(i)) % 360; }
    return h;
  }

  // A region's colour is the header badge's (chirp.css's .region-<name> { --region }), so that a
  // region looks the same everywhere; a region without one gets a hue of its own.
  var colours = {};
  function colour(name, lightness) {
    if (!(name in colours)) {
      var probe = document.createElement("span");
      probe.className = "region-" + name;
      document.body.appendChild(probe);
      colours[name] = getComputedStyle(probe).getPropertyValue("--region").trim();
      probe.remove();
      var inherited = getComputedStyle(document.body).getPropertyValue("--region").trim();
      if (colours[name] === inherited && !document.body.classList.contains("region-" + name)) {
        colours[name] = "";  // no rule of its own: the page's colour leaked through
      }
    }
    return colours[name] || "hsl(" + hue(name) + " " + lightness + ")";
  }

  layout.nodes.forEach(function (n) { where[n.name] = { x: 40 + n.x * (W - 80), y: n.y * H }; });
  layout.edges.forEach(function (e) {
    make("line", { x1: where[e[0]].x, y1: where[e[0]].y, x2: where[e[1]].x, y2: where[e[1]].y, "class": "edge" });
  });
  var dots = make("g", { "class": "dots" });
  var shapes = {};
  layout.nodes.forEach(function (n) {
    var p = where[n.name], group = make("g", { "class": "node " + n.kind, "data-node": n.name });
    if (n.kind === "region") {
      shapes[n.name] = make("circle", { cx: p.x, cy: p.y, r: 28, fill: colour(n.name, "60% 45%") }, group);
    } else {
      shapes[n.name] = make("rect", { x: p.x - 14, y: p.y - 14, width: 28, height: 28, rx: 4 }, group);
    }
    var text = make("text", { x: p.x, y: p.y + (n.kind === "region" ? 56 : -26), "text-anchor": "middle" }, group);
    text.textContent = n.name;
  });

  function travel(path, origin, delay, duration) {
    var points = path.map(function (name) { return where[name]; });
    var dot = make("circle", { r: 8, "class": "label-dot", fill: colour(origin, "70% 50%") }, dots);
    dot.setAttribute("cx", points[0].x);
    dot.setAttribute("cy", points[0].y);
    var started = null;
    function step(now) {
      if (started === null) { started = now + delay; }
      var t = Math.max(0, Math.min(1, (now - started) / duration)) * (points.length - 1);
      var i = Math.min(Math.floor(t), points.length - 2), f = t - i;
      dot.setAttribute("cx", points[i].x + (points[i + 1].x - points[i].x) * f);
      dot.setAttribute("cy", points[i].y + (points[i + 1].y - points[i].y) * f);
      if (now - started < duration) { requestAnimationFrame(step); } else { dot.remove(); }
    }
    requestAnimationFrame(step);
  }

  function cell(pair, name, value) {
    var row = document.querySelector('tr[data-pair="' + pair + '"]');
    if (row) { row.querySelector("td." + name).textContent = value; }
  }

  function listen() {
    var source = new EventSource("/causality/events");
    source.addEventListener("open", function () { status.textContent = "Live: a frame a second."; });
    source.addEventListener("error", function () {
      if (source.readyState === EventSource.CLOSED) {  // refused (busy): the browser gives up, we do not
        status.textContent = "The live view is busy; trying again in 15 s…";
        setTimeout(listen, 15000);
      } else {
        status.textContent = "Reconnecting…";
      }
    });
    source.addEventListener("frame", show);
  }

  function show(event) {
    var frame = JSON.parse(event.data);
    Object.keys(frame.regions).forEach(function (name) {
      var node = svg.querySelector('[data-node="' + name + '"]');
      if (node) { node.classList.toggle("down", !frame.regions[name].up); }
    });
    Object.keys(frame.pairs).forEach(function (pair) {
      var p = frame.pairs[pair], path = layout.paths[pair];
      cell(pair, "applied", p.applied);
      cell(pair, "last", p.visibility_ms === null ? "—" : p.visibility_ms + " ms");
      cell(pair, "mean", p.mean_ms === null ? "—" : p.mean_ms + " ms");
      if (!path || !p.applied) { return; }
      var origin = pair.split(">")[0], duration = 700 + 250 * (path.length - 1);
      for (var k = 0; k < Math.min(p.applied, MAX_DOTS); k++) { travel(path, origin, k * 120, duration); }
    });
  }

  listen();
})();
