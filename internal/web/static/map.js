// The geogate map: the style document /styles/default (every tile layer
// the caller may read, from its OGC tiles), an API key sent with every
// request to this origin, the nearest cities of a clicked spot from
// /within, and the visitor's quota: /rate_limit, kept current by the
// RateLimit headers of every answer, the map's own tiles included.
(function () {
  'use strict';
  var KEY = 'geogate-api-key';
  var keyInput = document.getElementById('apikey');
  var apiKey = sessionStorage.getItem(KEY) || '';
  keyInput.value = apiKey;

  function setStatus(msg) { document.getElementById('status').textContent = msg; }
  function sameOrigin(url) { return new URL(url, location.href).origin === location.origin; }
  function headers() { return apiKey ? { 'x-api-key': apiKey } : {}; }
  function getJSON(url) {
    return fetch(url, { headers: headers() }).then(function (res) {
      noteLimits(res);
      if (!res.ok) {
        return res.json().catch(function () { return {}; }).then(function (body) {
          var detail = typeof body.detail === 'string' ? body.detail : 'HTTP ' + res.status;
          throw new Error(detail);
        });
      }
      return res.json();
    });
  }

  // ---- The quota panel ----------------------------------------------
  // windows maps a window's name (as in the RateLimit headers) to what is
  // known of it: limit, remaining, window seconds, when it resets (ms
  // since the epoch) and, for calendar quotas, the period.
  var quota = { policies: [], windows: {}, identity: '', tier: null, loaded: false };

  // items parses a RateLimit or RateLimit-Policy field: a list of
  // "name";key=value;... items.
  function items(field) {
    var out = [];
    (field || '').split(/,(?=\s*")/).forEach(function (item) {
      var m = /^\s*"([^"]*)"(.*)$/.exec(item);
      if (!m) { return; }
      var params = {};
      m[2].split(';').forEach(function (kv) {
        var p = kv.trim().split('=');
        if (p.length === 2) { params[p[0]] = Number(p[1]); }
      });
      out.push({ name: m[1], params: params });
    });
    return out;
  }

  function noteLimits(res) {
    var current = items(res.headers.get('RateLimit'));
    if (current.length === 0) { return; }
    var policy = current[0].name; // the first window is named after the policy
    var limits = {};
    items(res.headers.get('RateLimit-Policy')).forEach(function (it) { limits[it.name] = it.params; });
    var now = Date.now();
    current.forEach(function (it) {
      var w = quota.windows[it.name];
      if (!w) {
        var lim = limits[it.name] || {};
        w = { name: it.name, limit: lim.q, window: lim.w, policy: policy };
        quota.windows[it.name] = w;
        var p = quota.policies.find(function (x) { return x.policy === policy; });
        if (!p) {
          p = { policy: policy, routes: [], windows: [] };
          quota.policies.push(p);
        }
        p.windows.push(w);
      }
      if (typeof it.params.r === 'number') { w.remaining = it.params.r; }
      if (typeof it.params.t === 'number') { w.resetAt = now + it.params.t * 1000; }
      if (w.calendar && w.remaining === 0 && res.headers.get('Retry-After')) {
        w.resetAt = now + Number(res.headers.get('Retry-After')) * 1000;
      }
    });
    renderQuota();
  }

  var lastLoad = 0;
  function loadQuota() {
    lastLoad = Date.now();
    return getJSON('/rate_limit').then(function (ans) {
      quota.identity = ans.identity;
      quota.tier = ans.tier;
      quota.windows = {};
      var now = Date.now();
      quota.policies = ans.policies.map(function (p) {
        p.windows.forEach(function (w) {
          w.policy = p.policy;
          w.resetAt = w.resets_at ? Date.parse(w.resets_at) : now + w.reset * 1000;
          quota.windows[w.name] = w;
        });
        return p;
      });
      quota.loaded = true;
      renderQuota();
    }).catch(function (err) {
      document.getElementById('quota').textContent = 'Quota: ' + err.message;
    });
  }

  function duration(s) {
    s = Math.max(0, Math.ceil(s));
    if (s < 60) { return s + ' s'; }
    if (s < 3600) { return Math.round(s / 60) + ' min'; }
    if (s < 172800) {
      var m = Math.round((s % 3600) / 60);
      return Math.floor(s / 3600) + ' h' + (m ? ' ' + m + ' min' : '');
    }
    return Math.round(s / 86400) + ' days';
  }

  function windowText(w, now) {
    var per = w.calendar === 'day' ? 'today' : w.calendar === 'month' ? 'this month'
      : w.window ? 'per ' + duration(w.window) : '';
    var text = (w.remaining === undefined ? '?' : w.remaining) + ' of ' + w.limit + ' left ' + per;
    if (w.resetAt) {
      var left = (w.resetAt - now) / 1000;
      if (w.calendar) {
        text += ' · resets in ' + duration(left) + ' (' + new Date(w.resetAt).toLocaleString() + ')';
      } else if (left > 0 && w.remaining < w.limit) {
        text += ' · more in ' + duration(left);
      }
    }
    return text;
  }

  function renderQuota() {
    var box = document.getElementById('quota');
    box.textContent = '';
    var now = Date.now();
    if (quota.identity) {
      var who = document.createElement('p');
      who.className = 'routes';
      who.textContent = 'Counted as ' + quota.identity + (quota.tier ? ', tier ' + quota.tier : '') + '.';
      box.appendChild(who);
    }
    quota.policies.forEach(function (p) {
      var h = document.createElement('h3');
      h.textContent = p.policy;
      box.appendChild(h);
      if (p.routes && p.routes.length) {
        var r = document.createElement('p');
        r.className = 'routes';
        r.textContent = p.routes.slice(0, 3).join(', ') + (p.routes.length > 3 ? ', …' : '');
        r.title = p.routes.join('\n');
        box.appendChild(r);
      }
      var ul = document.createElement('ul');
      p.windows.forEach(function (w) {
        var li = document.createElement('li');
        li.dataset.window = w.name;
        li.textContent = windowText(w, now);
        if (w.remaining === 0) { li.className = 'out'; } else if (w.remaining < w.limit / 10) { li.className = 'low'; }
        ul.appendChild(li);
      });
      if (p.concurrency) {
        var li = document.createElement('li');
        li.textContent = p.concurrency.in_flight + ' of ' + p.concurrency.limit + ' in flight';
        ul.appendChild(li);
      }
      box.appendChild(ul);
    });
  }

  function noteRefused(what, res) {
    return res.json().catch(function () { return {}; }).then(function (body) {
      var note = document.getElementById('quota-note');
      var names = (body['violated-policies'] || []).join(', ');
      var retry = res.headers.get('Retry-After');
      note.className = 'refused';
      note.textContent = what + ' refused (429): ' + (body.detail || 'rate limit exceeded') +
        (names ? ' [' + names + ']' : '') + (retry ? ' Retry in ' + duration(Number(retry)) + '.' : '');
    });
  }

  function clearRefused() {
    var note = document.getElementById('quota-note');
    if (note.className === 'refused') { note.className = ''; note.textContent = ''; }
  }

  // Tiles of this origin are fetched here, through the geogate:// scheme
  // the style's sources are rewritten to, so that their RateLimit headers
  // and refusals reach the quota panel (MapLibre's own requests do not
  // show their headers).
  var SCHEME = 'geogate://';
  maplibregl.addProtocol('geogate', function (params, abort) {
    var url = params.url.slice(SCHEME.length);
    return fetch(url, { headers: headers(), signal: abort.signal }).then(function (res) {
      noteLimits(res);
      if (res.status === 429) {
        return noteRefused('Tiles', res).then(function () { throw new Error('tile refused: HTTP 429'); });
      }
      if (!res.ok) { throw new Error('tile: HTTP ' + res.status); }
      clearRefused();
      if (res.status === 204) { return { data: new ArrayBuffer(0) }; }
      return res.arrayBuffer().then(function (data) { return { data: data }; });
    });
  });

  function throughQuota(style) {
    Object.keys(style.sources || {}).forEach(function (id) {
      var src = style.sources[id];
      if (!src.tiles) { return; }
      src.tiles = src.tiles.map(function (u) {
        var abs = /^https?:\/\//.test(u) ? u : location.origin + u;
        return sameOrigin(abs) ? SCHEME + abs : u;
      });
    });
    return style;
  }

  var map = new maplibregl.Map({
    container: 'map',
    style: {
      version: 8,
      sources: {},
      layers: [{ id: 'background', type: 'background', paint: { 'background-color': '#dde8ef' } }]
    },
    center: [10, 50],
    zoom: 3,
    transformRequest: function (url) {
      return apiKey && sameOrigin(url) ? { url: url, headers: headers() } : { url: url };
    }
  });
  map.addControl(new maplibregl.NavigationControl());
  window.geogateMap = map;

  // The style document draws every layer the caller may read, from its
  // OGC tiles; it is fetched here, with the key, and handed to the map
  // whole, so that a new key redraws every source. Only the latest request
  // counts: an answer to an older key that arrives late is dropped.
  var styleRequests = 0;
  function loadStyle() {
    var mine = ++styleRequests;
    return getJSON('/styles/default').then(function (style) {
      if (mine !== styleRequests) { return; }
      map.setStyle(throughQuota(style), { diff: false });
      var layers = (style.metadata && style.metadata['geogate:layers']) || [];
      var ul = document.getElementById('layers');
      ul.textContent = '';
      layers.forEach(function (l) {
        var li = document.createElement('li');
        li.textContent = l.id + ' (' + l.geometry + ')';
        ul.appendChild(li);
      });
      setStatus(layers.length + ' layers');
    }).catch(function (err) {
      if (mine === styleRequests) { setStatus('Style: ' + err.message); }
    });
  }

  document.getElementById('keyform').addEventListener('submit', function (e) {
    e.preventDefault();
    apiKey = keyInput.value.trim();
    if (apiKey) { sessionStorage.setItem(KEY, apiKey); } else { sessionStorage.removeItem(KEY); }
    loadStyle();
    loadQuota();
  });

  map.on('click', function (e) {
    var lng = e.lngLat.wrap().lng, lat = e.lngLat.lat;
    var here = lng.toFixed(4) + ', ' + lat.toFixed(4);
    document.getElementById('clicked').textContent = 'Near ' + here + ':';
    var ol = document.getElementById('nearest');
    ol.textContent = '';
    var q = new URLSearchParams({ lng: lng.toFixed(6), lat: lat.toFixed(6), radius: '50000', limit: '10' });
    getJSON('/within?' + q).then(function (fc) {
      if (fc.features.length === 0) {
        document.getElementById('clicked').textContent = 'No city within 50 km of ' + here + '.';
      }
      fc.features.forEach(function (f) {
        var li = document.createElement('li');
        var km = (f.properties.distance_m / 1000).toFixed(1);
        li.textContent = f.properties.name + ' (' + km + ' km)';
        ol.appendChild(li);
      });
    }).catch(function (err) {
      document.getElementById('clicked').textContent = 'Near ' + here + ': ' + err.message;
    });
  });

  map.on('load', loadStyle);
  loadQuota();
  // The counts move on their own as windows slide and periods end: read
  // them again now and then (each read costs one of the rate-limit
  // policy's 60 a minute), and count the resets down meanwhile.
  setInterval(function () { if (!document.hidden) { loadQuota(); } }, 15000);
  setInterval(function () {
    if (!quota.loaded || document.hidden) { return; }
    var now = Date.now();
    // A sliding window that has passed its reset has room again: how
    // much, only a new read can tell (at most every 5 s).
    var stale = Object.keys(quota.windows).some(function (k) {
      var w = quota.windows[k];
      return !w.calendar && w.remaining < w.limit && w.resetAt && w.resetAt <= now;
    });
    if (stale && now - lastLoad > 5000) { loadQuota(); } else { renderQuota(); }
  }, 1000);
})();
