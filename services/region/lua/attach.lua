-- Whether a client's causal past (its label) is visible here (paper Alg. 1), for an attach.
-- Under saturn: a migration label made for this region is visible once the tree has delivered
-- it here (made here: at once); any other label once every other region's watermark has passed
-- it (a label says only how far the client's past goes, not where it is). Under gentlerain every
-- label waits until it is stable here (the receiver raises every origin's watermark to the global
-- stable time). Under cure, once every region's watermark has reached the client's vector's entry
-- for it (the receiver's watermark is what it applied: services/protocols/cure.py). Under c3, a
-- migration label once the receiver has executed it (its dependency vector held here:
-- services/c3/applier.py), any other label once every region that ships here has passed it.
-- Eventual applies on arrival: at once.
-- args: api, label (5), µs the caller has waited so far. Returns {1} when visible, else {0, the
-- last watermark event's id, the events stream's key}: a caller blocks on that stream after
-- that id (XREAD BLOCK), then asks again. A visible non-zero label's wait is counted in
-- ATTACH_WAITS_KEY ("<origin>|<kind>|count", "|sum_us", "|b<i>": waits up to the i-th of
-- ATTACH_BUCKETS_US, "|inf": longer), which the region's metrics endpoint serves.
local function record_wait(origin, kind, waited)
  local prefix = origin .. '|' .. kind .. '|'
  redis.call('HINCRBY', ATTACH_WAITS_KEY, prefix .. 'count', 1)
  redis.call('HINCRBY', ATTACH_WAITS_KEY, prefix .. 'sum_us', waited)
  for i, bound in ipairs(ATTACH_BUCKETS_US) do
    if waited <= bound then
      redis.call('HINCRBY', ATTACH_WAITS_KEY, prefix .. 'b' .. i, 1)
      return
    end
  end
  redis.call('HINCRBY', ATTACH_WAITS_KEY, prefix .. 'inf', 1)
end

-- Under c3, a client let in with a past up to ts that this region's updates may not cover (it
-- read elsewhere) makes every later label of this region depend on everything up to ts: an
-- entry in the label stream, in ts order before those labels, that services/c3/sender.py reads.
local function note_attach(cfg, ts)
  local stamp = own_ts(cfg, math.max(now_us(), tonumber(redis.call('HGET', GEAR_KEY, 'last_ts') or '0') + 1))
  redis.call('HSET', GEAR_KEY, 'last_ts', I(stamp))
  redis.call('XADD', LABEL_STREAM, I(stamp) .. '-0', LABEL_FIELD, 'a|' .. I(stamp) .. '|' .. cfg.gear .. '|' .. I(ts))
end

local function gear_attach(keys, args)
  check_api(args[1])
  local cfg = config()
  local ts, src, kind, target, vector = check_label(cfg, args, 2)
  local waited = whole(args[7])
  if waited == nil then fail(CODE_INVALID, 'an attach says how long it has waited (whole µs)') end
  check_consumed(args, 8)
  if ts == 0 then return {1} end
  local origin = string.match(src, '^([^/]*)/')
  local arriving = kind == '1' and target == cfg.region
  local visible = true
  local last = nil
  local rule = cfg.attach  -- the protocol's attach rule (services/traits.py)
  if rule ~= 'none' then
    last = redis.call('XREVRANGE', WATERMARK_EVENTS, '+', '-', 'COUNT', 1)
    local marks = {}
    local flat = redis.call('HGETALL', WATERMARK_KEY)
    for i = 1, #flat, 2 do marks[flat[i]] = tonumber(flat[i + 1]) end
    if arriving and rule == 'tree' then
      visible = origin == cfg.region or (marks[origin] or 0) >= ts
    elseif arriving and rule == 'direct' then
      visible = origin == cfg.region or (marks[MIGRATED_PREFIX .. origin] or 0) >= ts
    elseif rule == 'direct' then
      for _, r in ipairs(words(cfg.senders)) do
        if (marks[r] or 0) < ts then visible = false end
      end
    elseif rule == 'vector' then
      vector[origin] = math.max(vector[origin] or 0, ts)
      for _, r in ipairs(words(cfg.senders)) do
        if (marks[r] or 0) < (vector[r] or 0) then visible = false end
      end
    else
      for _, r in ipairs(words(cfg.regions)) do
        if r ~= cfg.region and (marks[r] or 0) < ts then visible = false end
      end
    end
  end
  if not visible then return {0, (last[1] and last[1][1]) or '0-0', WATERMARK_EVENTS} end
  if rule == 'direct' and not arriving and origin ~= cfg.region then note_attach(cfg, ts) end
  record_wait(origin, arriving and 'migration' or 'update', waited)
  return {1}
end
