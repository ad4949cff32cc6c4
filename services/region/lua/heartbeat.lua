-- Gear HEARTBEAT: promise that every later label of this gear is above now. Raises last_ts to
-- the physical clock and returns it; labels at or below it are already in the label stream.
-- KEYS: gear.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('HGET', KEYS[1], 'last_ts') or '0')
if now > last then
  redis.call('HSET', KEYS[1], 'last_ts', I(now))
  return now
end
return last
