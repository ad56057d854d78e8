-- Acquire one in-flight slot, atomically.
--
-- KEYS[1]  a sorted set of the identity's in-flight request tokens, scored
--          by when their lease ends (microseconds)
-- ARGV[1]  the time in microseconds, or "" to read the Redis clock (TIME)
-- ARGV[2]  how many may be in flight at once
-- ARGV[3]  lease in microseconds: a token not released by then is dropped,
--          so a replica that dies mid-request frees its slot by itself
-- ARGV[4]  this request's token
--
-- Returns {acquired, in_flight}.
-- Redis < 5 must replicate effects, not the script, as it reads TIME.
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local max = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', now))
local c = redis.call('ZCARD', key)
if c >= max then return {0, c} end
redis.call('ZADD', key, string.format('%.0f', now + lease), ARGV[4])
redis.call('PEXPIRE', key, math.ceil(lease / 1000))
return {1, c + 1}
