// The geogate map: the style document /styles/default (every tile layer
// the caller may read, from its OGC tiles), an API key sent with every
// request to this origin, and the nearest cities of a clicked spot from
// /within.
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
      if (!res.ok) {
        return res.json().catch(function () { return {}; }).then(function (body) {
          var detail = typeof body.detail === 'string' ? body.detail : 'HTTP ' + res.status;
          throw new Error(detail);
        });
      }
      return res.json();
    });
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
      map.setStyle(style, { diff: false });
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
})();
