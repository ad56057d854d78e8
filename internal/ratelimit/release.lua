-- Release an in-flight slot: KEYS[1] as in acquire.lua, ARGV[1] the token.
return redis.call('ZREM', KEYS[1], ARGV[1])
