-- Sliding-window counter approximation, atomic in one run, O(1) memory.
--
-- KEYS[1]  a hash of one (policy, identity); per window of period p it
--          holds fields p:b (index of the current fixed bucket), p:c (its
--          count) and p:p (the previous bucket's count), and field x the
--          millisecond at which the whole hash is forgotten
-- KEYS[2..] the calendar quotas' counters, then optionally the day's
--          tally of decisions, as in log.lua
-- ARGV     as in log.lua (ARGV[3] is unused); cost 0 only reads, writing
--          nothing
--
-- Every unit was admitted at or before the last admission, so one longest
-- period after it every sliding window is empty: the key expires then, and
-- the script treats the hash as empty from x on (x is that moment on the
-- script's clock, which is the caller's when ARGV[1] is given; PEXPIRE
-- always runs on Redis's). Forgetting the buckets then only drops the
-- approximation's over-count of units that have left every window.
--
-- Time is counted in whole milliseconds. At time t in bucket b = floor(t/p),
-- elapsed e = t - b*p, a window's estimate is prev * (p - e) / p + cur. A
-- request is admitted when, for every window, cost <= limit and
-- estimate + cost <= limit, compared exactly in integers:
-- prev * (p - e) + (cur + cost) * p <= limit * p (kept below 2^53).
--
-- Calendar quotas are checked and charged as in log.lua, all or nothing
-- with the windows.
--
-- Returns the same shape as log.lua: {admitted, now, then per window and
-- then per quota: used, reset_us, retry_us}; a window's used is limit minus
-- the whole units left.
-- Redis < 5 must replicate effects, not the script, as it reads TIME.
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local nowus
if ARGV[1] == '' then
  local t = redis.call('TIME')
  nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  nowus = tonumber(ARGV[1])
end
local cost = tonumber(ARGV[2])
local h = (#ARGV - 3) % 2
local q = #KEYS - 1 - h
local n = (#ARGV - 3 - h) / 2 - q

local function int(x) return string.format('%.0f', x) end

-- floor(a / b) exactly, for integers a and b > 0 below 2^53.
local function fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

local now = fdiv(nowus, 1000)

local function fits(s, k)
  return k <= s.limit and s.prev * (s.period - s.e) + (s.cur + k) * s.period <= s.limit * s.period
end

-- The first millisecond at which a request of cost k fits, with nothing
-- else admitted meanwhile; nil when it fits now or never can.
local function fitsAt(s, k)
  if k > s.limit or fits(s, k) then return nil end
  if s.cur + k <= s.limit then
    return s.bucket * s.period + s.period - fdiv((s.limit - k - s.cur) * s.period, s.prev)
  end
  return (s.bucket + 1) * s.period + s.period - fdiv((s.limit - k) * s.period, s.cur)
end

local longest = 0
for i = 1, n do
  longest = math.max(longest, tonumber(ARGV[3 + 2 * i]) / 1000)
end
-- expires: when the stored state is forgotten; nil while none is stored.
local expires = nil
if n > 0 then expires = tonumber(redis.call('HGET', key, 'x')) end
local stale = expires ~= nil and now >= expires
if stale then expires = nil end

-- after returns the microseconds until millisecond at (0 for nil); no
-- moment lies beyond the state's expiry, when everything that can fit fits.
local function after(at)
  if at == nil then return 0 end
  if expires ~= nil and at > expires then at = expires end
  return at * 1000 - nowus
end

local states = {}
local admitted = 1
for i = 1, n do
  local s = {limit = tonumber(ARGV[2 + 2 * i]), period = tonumber(ARGV[3 + 2 * i]) / 1000, cur = 0, prev = 0}
  s.field = int(s.period)
  local v = {}
  if not stale then v = redis.call('HMGET', key, s.field .. ':b', s.field .. ':c', s.field .. ':p') end
  s.bucket = fdiv(now, s.period)
  local b = tonumber(v[1])
  if b ~= nil and b >= s.bucket then
    s.bucket = b
    s.cur, s.prev = tonumber(v[2]), tonumber(v[3])
  elseif b ~= nil and b == s.bucket - 1 then
    s.prev = tonumber(v[2])
  end
  s.e = math.max(0, now - s.bucket * s.period)
  if not fits(s, cost) then admitted = 0 end
  states[i] = s
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
    if stale then redis.call('DEL', key) end
    expires = now + longest
    for i = 1, n do
      local s = states[i]
      s.cur = s.cur + cost
      redis.call('HSET', key, s.field .. ':b', int(s.bucket), s.field .. ':c', int(s.cur), s.field .. ':p', int(s.prev))
    end
    redis.call('HSET', key, 'x', int(expires))
    redis.call('PEXPIRE', key, int(longest))
  end
  for j = 1, q do
    redis.call('INCRBY', KEYS[1 + j], cost)
    redis.call('PEXPIRE', KEYS[1 + j], math.ceil(math.max(0, quotas[j].ends - nowus) / 1000) + 60000)
  end
end

local out = {admitted, nowus}
for i = 1, n do
  local s = states[i]
  local left = fdiv(s.limit * s.period - s.prev * (s.period - s.e) - s.cur * s.period, s.period)
  if left < 0 then left = 0 end
  local reset
  if left > 0 then reset = after((s.bucket + 1) * s.period) else reset = after(fitsAt(s, 1)) end
  local retry = 0
  if admitted == 0 then retry = after(fitsAt(s, cost)) end
  out[#out + 1] = s.limit - left
  out[#out + 1] = reset
  out[#out + 1] = retry
end
for j = 1, q do
  local s = quotas[j]
  local used = s.count
  if admitted == 1 then used = used + cost end
  local reset = math.max(0, s.ends - nowus)
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
