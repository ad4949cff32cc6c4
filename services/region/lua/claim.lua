-- Strongly consistent claims (never replicated), decided by the key's owner region: one
-- compare-and-set here, so of concurrent claims from any regions exactly one wins.
-- args: api, namespace, key, holder, release ('1': give it up if holder holds it).
-- Returns {granted (1/0), holder ('' when free)}.
local MAX_CLAIM_PART = 200

-- (also the strong registers' names, strong.lua: ``what`` names the part, e.g. 'claim key')
local function check_part(what, value)
  if value == nil or value == '' then fail(CODE_INVALID, what .. ' must not be empty') end
  local chars = 0
  for _ in string.gmatch(value, '[^\128-\191]') do chars = chars + 1 end
  if chars > MAX_CLAIM_PART or string.find(value, '[%z\1-\31\127]') then
    fail(CODE_INVALID, what .. ' must be 1-' .. MAX_CLAIM_PART .. ' printable characters')
  end
end

local function gear_claim(keys, args)
  check_api(args[1])
  local cfg = config()
  local namespace, key, holder, release = args[2], args[3], args[4], args[5] == '1'
  check_part('claim namespace', namespace)
  check_part('claim key', key)
  check_part('claim holder', holder)
  if args[5] ~= '1' and args[5] ~= '0' then fail(CODE_INVALID, 'a claim says whether it is a release (1/0)') end
  check_consumed(args, 6)
  local regions = words(cfg.regions)
  local owner = regions[crc32(namespace .. '\0' .. key) % #regions + 1]
  if owner ~= cfg.region then
    fail(CODE_NOTOWNER, 'claims of ' .. namespace .. '/' .. key .. ' are decided by region ' .. owner
      .. ', not ' .. cfg.region)
  end
  local name = CLAIM_PREFIX .. namespace .. '\0' .. key
  local current = redis.call('GET', name)
  if release then
    if current == holder then
      redis.call('DEL', name)
      return {1, ''}
    end
    return {0, current or ''}
  end
  if not current then
    redis.call('SET', name, holder)
    return {1, holder}
  end
  return {current == holder and 1 or 0, current}
end
