// The map's devices layer: the caller's devices where they were last (GET
// /devices, read again every two seconds) and the events of its
// subscription to the built-in fences as they happen, from the live
// stream (GET /events/stream). EventSource cannot send the API key, so
// the stream is read with fetch and split into messages here; after a
// break it resumes from the last event seen (Last-Event-ID).
(function () {
  'use strict';
  var map = window.geogateMap;
  var toggle = document.getElementById('devices-toggle');
  var statusEl = document.getElementById('devices-status');
  var list = document.getElementById('events');
  var MAX_EVENTS = 50;
  var state = { on: false, sub: '', lastId: '', abort: null, timer: 0, fences: {} };

  function key() { return sessionStorage.getItem('geogate-api-key') || ''; }
  function headers(extra) {
    var h = extra || {};
    if (key()) { h['x-api-key'] = key(); }
    return h;
  }
  function setStatus(msg) { statusEl.textContent = msg; }
  function getJSON(url) {
    return fetch(url, { headers: headers() }).then(function (res) {
      if (!res.ok) {
        return res.json().catch(function () { return {}; }).then(function (b) {
          throw new Error(typeof b.detail === 'string' ? b.detail : 'HTTP ' + res.status);
        });
      }
      return res.json();
    });
  }

  // ---- Devices on the map --------------------------------------------
  function ensureLayer() {
    if (!map.getSource('devices')) {
      map.addSource('devices', { type: 'geojson', data: { type: 'FeatureCollection', features: [] } });
    }
    if (!map.getLayer('devices-points')) {
      map.addLayer({
        id: 'devices-points', type: 'circle', source: 'devices',
        paint: {
          'circle-radius': 7, 'circle-color': '#d9480f',
          'circle-stroke-color': '#fff', 'circle-stroke-width': 2
        }
      });
    }
  }

  function showDevices(devs) {
    if (!map.isStyleLoaded()) { return; }
    ensureLayer();
    map.getSource('devices').setData({
      type: 'FeatureCollection',
      features: devs.map(function (d) {
        return { type: 'Feature', id: d.id, properties: { id: d.id, time: d.time }, geometry: { type: 'Point', coordinates: [d.lng, d.lat] } };
      })
    });
  }

  // allDevices reads the devices page by page from after on, at most
  // pages pages: a demo map that polls every two seconds shows the first
  // thousand or so by id.
  function allDevices(after, got, pages) {
    var q = after ? '?after=' + encodeURIComponent(after) : '';
    return getJSON('/devices' + q).then(function (ans) {
      got = got.concat(ans.devices);
      return ans.next && pages > 1 ? allDevices(ans.next, got, pages - 1) : got;
    });
  }

  function pollDevices() {
    if (!state.on) { return; }
    allDevices('', [], 10).then(function (devs) {
      if (state.on) { showDevices(devs); }
    }).catch(function (err) {
      setStatus('Devices: ' + err.message);
    }).then(function () {
      if (state.on) { state.timer = setTimeout(pollDevices, 2000); }
    });
  }

  // ---- Events as they happen -----------------------------------------
  // fenceName resolves a built-in fence's id to its name once (the demo
  // fences are named by their ISO 3166 alpha-3 codes).
  function fenceName(id) {
    if (!state.fences[id]) {
      state.fences[id] = getJSON('/geofences/' + encodeURIComponent(id))
        .then(function (f) { return f.properties && f.properties.name ? f.properties.name : 'fence ' + id; })
        .catch(function () { return 'fence ' + id; });
    }
    return state.fences[id];
  }

  function addEvent(ce) {
    var li = document.createElement('li');
    li.className = ce.data.kind;
    li.dataset.sequence = ce.sequence;
    var when = new Date(ce.time).toLocaleTimeString();
    li.textContent = when + ' ' + ce.subject + ' ' + ce.data.kind + ' fence ' + ce.data.fence;
    list.insertBefore(li, list.firstChild);
    while (list.children.length > MAX_EVENTS) { list.removeChild(list.lastChild); }
    fenceName(ce.data.fence).then(function (name) {
      li.textContent = when + ' ' + ce.subject + ' ' + ce.data.kind + ' ' + name;
    });
  }

  // onMessage handles one server-sent message (its lines, without the
  // blank line ending it).
  function onMessage(lines) {
    var id = '', data = '';
    lines.forEach(function (line) {
      if (line.indexOf('id: ') === 0) { id = line.slice(4); }
      if (line.indexOf('data: ') === 0) { data += line.slice(6); }
    });
    if (!data) { return; } // a comment: the heartbeat
    state.lastId = id;
    try { addEvent(JSON.parse(data)); } catch (e) { /* not an event */ }
  }

  function follow() {
    if (!state.on) { return; }
    var abort = new AbortController();
    state.abort = abort;
    var h = headers({ Accept: 'text/event-stream' });
    if (state.lastId) { h['Last-Event-ID'] = state.lastId; }
    fetch('/events/stream?subscription=' + encodeURIComponent(state.sub), { headers: h, signal: abort.signal }).then(function (res) {
      if (!res.ok) { throw new Error('HTTP ' + res.status); }
      setStatus('Following subscription ' + state.sub.slice(0, 8) + '…');
      var reader = res.body.getReader();
      var decoder = new TextDecoder();
      var buf = '';
      function read() {
        return reader.read().then(function (r) {
          if (r.done) { return; }
          buf += decoder.decode(r.value, { stream: true });
          var parts = buf.split('\n\n');
          buf = parts.pop();
          parts.forEach(function (p) { onMessage(p.split('\n')); });
          return read();
        });
      }
      return read();
    }).catch(function (err) {
      if (err.name !== 'AbortError') { setStatus('Stream: ' + err.message + '; reconnecting'); }
    }).then(function () {
      // The stream ended (a replica going away, the network): go on
      // from the last event seen.
      if (state.on && state.abort === abort) { setTimeout(follow, 2000); }
    });
  }

  function start() {
    state.on = true;
    setStatus('Looking for your subscription to geofences…');
    getJSON('/subscriptions').then(function (ans) {
      var subs = ans.subscriptions.filter(function (s) { return s.layer === 'geofences'; });
      if (subs.length === 0) {
        setStatus('No subscription to geofences: run api simulate, or POST /subscriptions.');
      } else {
        state.sub = subs[0].id;
        state.lastId = '';
        list.textContent = '';
        follow();
      }
      pollDevices();
    }).catch(function (err) {
      setStatus('Devices: ' + err.message);
    });
  }

  function stop() {
    state.on = false;
    clearTimeout(state.timer);
    if (state.abort) { state.abort.abort(); state.abort = null; }
    if (map.getLayer('devices-points')) { map.removeLayer('devices-points'); }
    if (map.getSource('devices')) { map.removeSource('devices'); }
    setStatus('');
  }

  toggle.addEventListener('change', function () { if (toggle.checked) { start(); } else { stop(); } });
  // A new key is another caller: start over with its subscription.
  document.getElementById('keyform').addEventListener('submit', function () {
    if (state.on) { stop(); toggle.checked = true; setTimeout(start, 0); }
  });
})();
