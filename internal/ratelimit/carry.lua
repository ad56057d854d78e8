-- Hands over to Redis, for one key, what one process admitted in process
-- while Redis could not decide: the units are added to what Redis counted,
-- so that Redis then decides the rest of every window knowing them.
--
-- KEYS[1]  a sliding-window log, a counter hash or a calendar quota's
--          counter, named as log.lua and counter.lua name them
-- ARGV[1]  'log', 'counter' or 'quota'
-- ARGV[2]  the hand-over's clock, in milliseconds since the epoch
-- ARGV[3]  when the process would have forgotten the key, in milliseconds
--          since the epoch: Redis keeps the key at least as long
-- log:     ARGV[4] a member prefix unique to this hand-over, ARGV[5..] the
--          admitted units' times in microseconds, one per unit
-- counter: ARGV[4..] per window, its period in milliseconds (as the field
--          names of counter.lua spell it), its current bucket, that
--          bucket's count and the previous bucket's count
-- quota:   ARGV[4] the units admitted in the quota's period
--
-- Counts add up: a bucket both hold is summed; where Redis has moved on a
-- bucket, the process's current bucket becomes Redis's previous one, and
-- older buckets no longer count anywhere.
local key, kind = KEYS[1], ARGV[1]
local now, forget = tonumber(ARGV[2]), tonumber(ARGV[3])

local function int(x) return string.format('%.0f', x) end

local function keep()
  local ttl = forget - now
  if ttl > 0 and redis.call('PTTL', key) < ttl then
    redis.call('PEXPIRE', key, int(ttl))
  end
end

if kind == 'log' then
  local prefix = ARGV[4]
  local j = 5
  while j <= #ARGV do
    local args = {}
    local last = math.min(#ARGV, j + 499)
    for k = j, last do
      args[#args + 1] = ARGV[k]
      args[#args + 1] = prefix .. '.' .. (k - 4)
    end
    redis.call('ZADD', key, unpack(args))
    j = last + 1
  end
elseif kind == 'counter' then
  local x = tonumber(redis.call('HGET', key, 'x'))
  if x ~= nil and now >= x then
    redis.call('DEL', key)
    x = nil
  end
  for i = 4, #ARGV, 4 do
    local f = ARGV[i]
    local b, c, p = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
    local v = redis.call('HMGET', key, f .. ':b', f .. ':c', f .. ':p')
    local rb, rc, rp = tonumber(v[1]), tonumber(v[2]) or 0, tonumber(v[3]) or 0
    if rb == b then
      c, p = c + rc, p + rp
    elseif rb == b - 1 then
      p = p + rc
    elseif rb ~= nil and rb > b then
      if rb == b + 1 then rp = rp + c end
      b, c, p = rb, rc, rp
    end
    redis.call('HSET', key, f .. ':b', int(b), f .. ':c', int(c), f .. ':p', int(p))
  end
  if x == nil or forget > x then x = forget end
  redis.call('HSET', key, 'x', int(x))
elseif kind == 'quota' then
  redis.call('INCRBY', key, ARGV[4])
end
keep()
return 1
