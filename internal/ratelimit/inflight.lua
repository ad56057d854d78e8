-- Count an identity's requests in flight, changing nothing.
--
-- KEYS[1]  the sorted set of in-flight tokens, as in acquire.lua
-- ARGV[1]  the time in microseconds, or "" to read the Redis clock (TIME)
--
-- Returns how many tokens' leases end after now: those acquire.lua would
-- count against the cap.
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
return redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%.0f', now), '+inf')
