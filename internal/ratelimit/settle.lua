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
-- ARGV[8..] the sliding windows' periods in microseconds (counter)
--
-- A refund (delta < 0) takes back units of the reservation itself: the
-- log's newest members of it, the counter's units in the bucket it was
-- counted in, if that bucket still counts. Units that have already left
-- every window are not refunded twice. An excess (delta > 0) is added
-- now, unconditionally: the work is done. The limiter's bound follows:
-- the units admitted in any window exceed its limit by at most what the
-- requests still in flight had under-reserved.
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local alg = ARGV[1]
local delta = tonumber(ARGV[2])
local prefix = ARGV[3]
local cost = tonumber(ARGV[4])
local at = tonumber(ARGV[5])
local longest = tonumber(ARGV[6])
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
elseif alg == 'log' and delta > 0 then
  local score = int(now)
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
  redis.call('PEXPIRE', key, math.ceil(longest / 1000))
elseif alg == 'counter' then
  local nowms, atms = fdiv(now, 1000), fdiv(at, 1000)
  local x = tonumber(redis.call('HGET', key, 'x'))
  local live = x ~= nil and nowms < x
  if live or delta > 0 then
    if not live then redis.call('DEL', key) end
    for i = 8, #ARGV do
      local p = tonumber(ARGV[i]) / 1000
      local f = int(p)
      local v = redis.call('HMGET', key, f .. ':b', f .. ':c', f .. ':p')
      local b, c, pr = tonumber(v[1]), tonumber(v[2]) or 0, tonumber(v[3]) or 0
      if delta < 0 then
        local rb = fdiv(atms, p)
        if b == rb then c = math.max(0, c + delta)
        elseif b == rb + 1 then pr = math.max(0, pr + delta) end
      else
        local nb = fdiv(nowms, p)
        if b == nil or b < nb - 1 then b, c, pr = nb, 0, 0
        elseif b == nb - 1 then b, c, pr = nb, 0, c end
        c = c + delta
      end
      if b ~= nil then
        redis.call('HSET', key, f .. ':b', int(b), f .. ':c', int(c), f .. ':p', int(pr))
      end
    end
    if delta > 0 then
      local until_ = nowms + longest / 1000
      if x == nil or not live or until_ > x then x = until_ end
      redis.call('HSET', key, 'x', int(x))
      redis.call('PEXPIRE', key, int(longest / 1000))
    end
  end
end

for j = 2, #KEYS do
  if redis.call('EXISTS', KEYS[j]) == 1 then
    local v = redis.call('INCRBY', KEYS[j], delta)
    if v < 0 then redis.call('SET', KEYS[j], 0, 'KEEPTTL') end
  end
end
return 1
