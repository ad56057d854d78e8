package ratelimit

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// A calendar quota counts the units admitted within one calendar period
// (a day or a month in the policy's time zone) in one integer per
// (policy, identity, period): O(1) memory, whatever the limit. Go works
// out the period, from the deciding clock (the caller's At, else this
// process's), and hands the script the period's counter key and its end;
// the script checks and charges the counter in the same run as the
// sliding windows, so a request refused by any window spends nothing
// anywhere.
//
// A counter lives until its period ends plus quotaGrace. Nothing reads it
// after its period, so the grace costs a little memory and buys
// exactness when this process's clock lags Redis's: a counter that Redis
// dropped at its own midnight while a replica still counts the old day
// would let that day admit its limit twice.
const quotaGrace = time.Minute

// period returns the calendar period of c around t in loc: when it starts
// and ends, and its label in counter keys ("2026-03-29", "2026-03").
func period(c Calendar, loc *time.Location, t time.Time) (start, end time.Time, label string) {
	y, m, d := t.In(loc).Date()
	if c == Month {
		start, end = time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
		return start, end, start.Format("2006-01")
	}
	start, end = time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	return start, end, start.Format("2006-01-02")
}

// quota is one calendar quota of one decision.
type quota struct {
	key        string
	limit      int64
	start, end int64 // the period, microseconds since the epoch
}

// quotas returns the calendar quotas of set at t (microseconds since the
// epoch) for the identity whose sliding-window key is key, in set.cal order.
func quotas(key string, set *windowSet, t int64) []quota {
	if len(set.cal) == 0 {
		return nil
	}
	out := make([]quota, len(set.cal))
	for j, i := range set.cal {
		w := set.ws[i]
		p := set.periods[j].Load()
		if p == nil || t < p.start || t >= p.end {
			start, end, label := period(w.Calendar, set.loc, time.UnixMicro(t))
			p = &cachedPeriod{start: start.UnixMicro(), end: end.UnixMicro(), label: label}
			set.periods[j].Store(p)
		}
		out[j] = quota{key: quotaKey(key, w.Calendar, p.label), limit: int64(w.Limit), start: p.start, end: p.end}
	}
	return out
}

// cachedPeriod is the calendar period a window set's quota last fell in:
// most decisions fall in the same one, and need not work it out again.
type cachedPeriod struct {
	start, end int64 // microseconds since the epoch
	label      string
}

// quotaKey names the counter of one calendar period next to key, the
// identity's sliding-window key, in the same Redis Cluster slot, so that one
// script may touch both. Usually that is key itself as the hash tag:
// "{rl:geofence:key:demo}:day:2026-03-29". A key that Redis hashes by a tag
// of its own, or whole although it holds a '}', cannot be wrapped so; its
// counter is "{<tag>}:<key>:day:...", with a tag that hashes to key's slot.
func quotaKey(key string, c Calendar, label string) string {
	return besideKey(key, ":"+string(c)+":"+label)
}

// besideKey names a key in key's Cluster slot that ends in suffix, as
// quotaKey describes.
func besideKey(key, suffix string) string {
	hashed := hashedPart(key)
	if hashed == key && !strings.Contains(key, "}") {
		return "{" + key + "}" + suffix
	}
	if hashed == key {
		hashed = slotTag(crc16(key) % slots)
	}
	return "{" + hashed + "}:" + key + suffix
}

// hashedPart is the part of key that Redis Cluster hashes: the text
// between the first '{' and the first '}' after it, when not empty, else
// the whole key.
func hashedPart(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

const slots = 16384

// keySlot is the Redis Cluster slot of key.
func keySlot(key string) uint16 { return crc16(hashedPart(key)) % slots }

// crc16 is CRC-16/XMODEM, the checksum of Redis Cluster's key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

var (
	slotTagsOnce sync.Once
	slotTags     []string
)

// slotTag returns a short hash tag whose slot is slot: the first number,
// written in base 36, that hashes there.
func slotTag(slot uint16) string {
	slotTagsOnce.Do(func() {
		slotTags = make([]string, slots)
		for n, left := int64(0), slots; left > 0; n++ {
			tag := strconv.FormatInt(n, 36)
			if s := crc16(tag) % slots; slotTags[s] == "" {
				slotTags[s] = tag
				left--
			}
		}
	})
	return slotTags[slot]
}
