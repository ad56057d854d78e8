-- Sliding-window log, with calendar quotas beside it, atomic in one run.
--
-- KEYS[1]  the sorted set of one (policy, identity): one member per admitted
--          unit, scored by its time in microseconds
-- KEYS[2..] one counter per calendar quota of the policy: the units
--          admitted in the current calendar period (a key per period)
-- ARGV[1]  the time in microseconds, or "" to read the Redis clock (TIME)
-- ARGV[2]  cost: units this request consumes; 0 only reads (see below)
-- ARGV[3]  a member prefix unique to this call
-- ARGV[4..] pairs of limit, period in microseconds (one pair per sliding
--          window), then pairs of limit, end of the current period in
--          microseconds since the epoch (one per calendar quota, in KEYS
--          order)
-- KEYS[#KEYS], ARGV[#ARGV] optionally, last of all: a hash counting the
--          identity's decisions of the day (fields a: admitted, r: refused)
--          and its time to live in milliseconds, set when the hash is new.
--          An odd count of ARGV after the third says it is there.
--
-- A unit admitted at s counts in a window of period p at time t while
-- s > t - p. The request is admitted only if every window and every quota
-- has room for the whole cost; then cost members are added, the key
-- expires after the longest period, and each quota's counter grows by
-- cost and expires a minute after its period ends. A rejected request
-- leaves no trace.
--
-- With cost 0 the script reads: it trims the log as a decision would and
-- reports the same counts, but adds nothing and changes no expiry.
--
-- Returns {admitted, now, then per sliding window and then per quota:
-- used, reset_us, retry_us}, where used counts the window's units after
-- the decision, reset_us is when its oldest unit leaves (a quota: when its
-- period ends) and retry_us when enough have left for the cost to fit (0
-- for windows with room or a cost above the limit).
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
local cost = tonumber(ARGV[2])
local prefix = ARGV[3]
local h = (#ARGV - 3) % 2
local q = #KEYS - 1 - h
local n = (#ARGV - 3 - h) / 2 - q

-- Lua prints large numbers in exponent form; scores must be exact.
local function int(x) return string.format('%.0f', x) end

local longest = 0
for i = 1, n do
  local p = tonumber(ARGV[3 + 2 * i])
  if p > longest then longest = p end
end
local total = 0
if n > 0 then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - longest))
  total = redis.call('ZCARD', key)
end
local counts = {}
local admitted = 1
for i = 1, n do
  local limit = tonumber(ARGV[2 + 2 * i])
  local period = tonumber(ARGV[3 + 2 * i])
  local c = total -- one window: the trim above left exactly its units
  if n > 1 then c = redis.call('ZCOUNT', key, '(' .. int(now - period), '+inf') end
  counts[i] = c
  if c + cost > limit then admitted = 0 end
end
local quotas = {}
for j = 1, q do
  local limit = tonumber(ARGV[2 + 2 * (n + j)])
  local ends = tonumber(ARGV[3 + 2 * (n + j)])
  local c = tonumber(redis.call('GET', KEYS[1 + j]) or '0')
  quotas[j] = {limit = limit, ends = ends, count = c}
  if c + cost > limit then admitted = 0 end
end

if admitted == 1 and cost > 0 then
  if n > 0 then
    local score = int(now)
    local j = 1
    while j <= cost do
      local args = {}
      local last = math.min(cost, j + 499)
      for k = j, last do
        args[#args + 1] = score
        if cost == 1 then args[#args + 1] = prefix else args[#args + 1] = prefix .. '.' .. k end
      end
      redis.call('ZADD', key, unpack(args))
      j = last + 1
    end
    total = total + cost
    redis.call('PEXPIRE', key, math.ceil(longest / 1000))
  end
  for j = 1, q do
    redis.call('INCRBY', KEYS[1 + j], cost)
    redis.call('PEXPIRE', KEYS[1 + j], math.ceil(math.max(0, quotas[j].ends - now) / 1000) + 60000)
  end
end

-- The units in a window are the newest ones: the unit k-th oldest in a
-- window holding c units has rank total - c + k - 1.
local function scoreAt(rank)
  local r = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
  return tonumber(r[2])
end

local out = {admitted, now}
for i = 1, n do
  local limit = tonumber(ARGV[2 + 2 * i])
  local period = tonumber(ARGV[3 + 2 * i])
  local used = counts[i]
  if admitted == 1 then used = used + cost end
  local reset = 0
  if used > 0 then reset = scoreAt(total - used) + period - now end
  local retry = 0
  if admitted == 0 and cost <= limit and counts[i] + cost > limit then
    local k = counts[i] + cost - limit
    retry = scoreAt(total - counts[i] + k - 1) + period - now
  end
  out[#out + 1] = used
  out[#out + 1] = reset
  out[#out + 1] = retry
end
for j = 1, q do
  local s = quotas[j]
  local used = s.count
  if admitted == 1 then used = used + cost end
  local reset = math.max(0, s.ends - now)
  local retry = 0
  if admitted == 0 and cost <= s.limit and s.count + cost > s.limit then retry = math.max(1, reset) end
  out[#out + 1] = used
  out[#out + 1] = reset
  out[#out + 1] = retry
end
-- The day's tally of decisions; reads (cost 0) are not decisions.
if h == 1 and cost > 0 then
  local field = 'r'
  if admitted == 1 then field = 'a' end
  if redis.call('HINCRBY', KEYS[#KEYS], field, 1) == 1 then
    redis.call('PEXPIRE', KEYS[#KEYS], ARGV[#ARGV])
  end
  -- u: the units the admitted requests spent, in the policy's unit;
  -- settle.lua moves it to their true cost.
  if admitted == 1 then redis.call('HINCRBY', KEYS[#KEYS], 'u', cost) end
end
return out
