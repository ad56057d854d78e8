-- Raises the version in KEYS[1] to ARGV[1] unless it is already at least
-- that high, so that versions published late or twice never go backwards.
-- Returns the version now stored.
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local new = tonumber(ARGV[1])
if new > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  return new
end
return cur
