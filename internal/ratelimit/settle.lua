-- Settles a request admitted by log.lua or counter.lua: its true cost
-- replaces the cost it reserved, atomically in one run.
--
-- KEYS[1]  the policy's key of the identity (the log's sorted set, or the
--          counter's hash)
-- KEYS[2..] the calendar quotas' counters of the reservation's periods
-- ARGV[1]  "log" or "counter"
-- ARGV[2]  delta: true cost minus reserved cost, never 0
-- ARGV[3]  the member prefix of the reservation (log)
-- ARGV[4]  the reserved cost (log: which members it added)
-- ARGV[5]  the reservation's time in microseconds (counter: its bucket)
-- ARGV[6]  the longest sliding period in microseconds
-- ARGV[7]  the time in microseconds, or "" to read the Redis clock (TIME)
-- ARGV[8]  "1" when KEYS[#KEYS] is the day's tally the reservation was
--          counted in (log.lua), whose units (field u) move by delta too;
--          "2" for a refund of a request refused by another policy, which
--          also takes its admission back out of the tally (field a)
-- ARGV[9..] the sliding windows' periods in microseconds (counter)
--
-- The true cost counts where the reservation did, at the time the request
-- was admitted. A refund (delta < 0) takes back units of the reservation
-- itself: the log's newest members of it, the counter's units in the
-- bucket it was counted in, if that bucket still counts. An excess (delta
-- > 0) is added unconditionally, since the work is done: log members
-- scored at the reservation's time, counter units in its bucket. Units
-- whose time has left every window are neither refunded nor added. The
-- limiter's bound follows: the true cost of the requests admitted in any
-- window exceeds its limit by at most what those still in flight had
-- under-reserved. Counting an excess at the time it is learned instead
-- would count a client's past and its next reservation in one window, so
-- a client running one request after another could be refused while its
-- true use was under the limit.
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local alg = ARGV[1]
local delta = tonumber(ARGV[2])
local prefix = ARGV[3]
local cost = tonumber(ARGV[4])
local at = tonumber(ARGV[5])
local longest = tonumber(ARGV[6])
local tallied = ARGV[8] ~= '0'
local quotaKeys = #KEYS
if tallied then quotaKeys = #KEYS - 1 end
local now
if ARGV[7] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[7])
end
if now < at then now = at end

local function int(x) return string.format('%.0f', x) end
local function fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

if longest == 0 then
  -- calendar quotas only: nothing in a log or counter
elseif alg == 'log' and delta < 0 then
  local r = math.min(-delta, cost)
  if cost == 1 then
    redis.call('ZREM', key, prefix)
  else
    local k = cost - r + 1
    while k <= cost do
      local args = {}
      local last = math.min(cost, k + 499)
      for j = k, last do args[#args + 1] = prefix .. '.' .. j end
      redis.call('ZREM', key, unpack(args))
      k = last + 1
    end
  end
elseif alg == 'log' and delta > 0 and at > now - longest then
  local score = int(at)
  local k = 1
  while k <= delta do
    local args = {}
    local last = math.min(delta, k + 499)
    for j = k, last do
      args[#args + 1] = score
      args[#args + 1] = prefix .. '+' .. j
    end
    redis.call('ZADD', key, unpack(args))
    k = last + 1
  end
  local ttl = math.ceil((at + longest - now) / 1000)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
elseif alg == 'counter' then
  local nowms, atms = fdiv(now, 1000), fdiv(at, 1000)
  local x = tonumber(redis.call('HGET', key, 'x'))
  -- The hash lives until a longest period after its last admission, the
  -- reservation's included: while it does, so does the reservation's
  -- bucket in every window that still counts it.
  if x ~= nil and nowms < x then
    for i = 9, #ARGV do
      local p = tonumber(ARGV[i]) / 1000
      local f = int(p)
      local v = redis.call('HMGET', key, f .. ':b', f .. ':c', f .. ':p')
      local b, c, pr = tonumber(v[1]), tonumber(v[2]) or 0, tonumber(v[3]) or 0
      local rb = fdiv(atms, p)
      if b == rb then
        redis.call('HSET', key, f .. ':c', int(math.max(0, c + delta)))
      elseif b == rb + 1 then
        redis.call('HSET', key, f .. ':p', int(math.max(0, pr + delta)))
      end
    end
  end
end

for j = 2, quotaKeys do
  if redis.call('EXISTS', KEYS[j]) == 1 then
    local v = redis.call('INCRBY', KEYS[j], delta)
    if v < 0 then redis.call('SET', KEYS[j], 0, 'KEEPTTL') end
  end
end
if tallied and redis.call('EXISTS', KEYS[#KEYS]) == 1 then
  if redis.call('HINCRBY', KEYS[#KEYS], 'u', delta) < 0 then redis.call('HSET', KEYS[#KEYS], 'u', 0) end
  if ARGV[8] == '2' and redis.call('HINCRBY', KEYS[#KEYS], 'a', -1) < 0 then redis.call('HSET', KEYS[#KEYS], 'a', 0) end
end
return 1
