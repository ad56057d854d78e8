package tiles

import (
	"container/list"
	"sync"
)

// memCache keeps recently served tiles in process memory, in front of
// Redis: a hot tile then costs one small Redis read (its layer's shared
// version) instead of the transfer of its bytes. Entries are keyed like
// the Redis copies, data version included, so a write retires both alike.
// The least recently used entries go first once the byte budget is spent.
// A nil *memCache keeps nothing.
type memCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List // front: most recently used
	items map[string]*list.Element
}

type memItem struct {
	key  string
	e    entry
	size int64
}

// newMemCache returns a cache of at most maxBytes of tiles, or nil for
// maxBytes <= 0.
func newMemCache(maxBytes int64) *memCache {
	if maxBytes <= 0 {
		return nil
	}
	return &memCache{max: maxBytes, order: list.New(), items: map[string]*list.Element{}}
}

func (m *memCache) get(key string) (entry, bool) {
	if m == nil {
		return entry{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.items[key]
	if !ok {
		return entry{}, false
	}
	m.order.MoveToFront(el)
	return el.Value.(*memItem).e, true
}

// put keeps e under key. A tile above an eighth of the budget is not kept:
// it would push out many others.
func (m *memCache) put(key string, e entry) {
	if m == nil {
		return
	}
	size := int64(len(key) + len(e.ETag) + len(e.Gzip) + 64)
	if size > m.max/8 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.items[key]; ok {
		it := el.Value.(*memItem)
		m.size += size - it.size
		it.e, it.size = e, size
		m.order.MoveToFront(el)
	} else {
		m.items[key] = m.order.PushFront(&memItem{key: key, e: e, size: size})
		m.size += size
	}
	for m.size > m.max {
		el := m.order.Back()
		it := el.Value.(*memItem)
		m.order.Remove(el)
		delete(m.items, it.key)
		m.size -= it.size
	}
}

// bytes is what the cache holds now.
func (m *memCache) bytes() int64 {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.size
}
