// The geogate map: every tile layer from its TileJSON, an API key sent with
// every request to this origin, and the nearest cities of a clicked spot
// from /within.
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

  var styles = {
    polygon: function (id) {
      return [
        { id: id + '-fill', type: 'fill', paint: { 'fill-color': '#2e86c1', 'fill-opacity': 0.25 } },
        { id: id + '-line', type: 'line', paint: { 'line-color': '#1b4f72', 'line-width': 1 } }
      ];
    },
    line: function (id) {
      return [{ id: id + '-line', type: 'line', paint: { 'line-color': '#1b4f72', 'line-width': 2 } }];
    },
    point: function (id) {
      return [{ id: id + '-points', type: 'circle', paint: { 'circle-radius': 3, 'circle-color': '#c0392b', 'circle-stroke-color': '#fff', 'circle-stroke-width': 1 } }];
    },
    // A column that does not say its type may hold any: each style draws
    // the features of its own kind.
    geometry: function (id) {
      var only = function (type, layers) {
        return layers.map(function (l) { l.filter = ['==', '$type', type]; return l; });
      };
      return only('Polygon', styles.polygon(id + '-p'))
        .concat(only('LineString', styles.line(id + '-l')))
        .concat(only('Point', styles.point(id)));
    }
  };

  function addLayers() {
    return getJSON('/tiles').then(function (list) {
      var ul = document.getElementById('layers');
      ul.textContent = '';
      // Polygons first so that points draw on top.
      var order = list.layers.slice().sort(function (a, b) {
        return (a.geometry === 'point') - (b.geometry === 'point');
      });
      order.forEach(function (l) {
        if (map.getSource(l.name)) { return; }
        map.addSource(l.name, { type: 'vector', url: l.tilejson });
        (styles[l.geometry] || styles.point)(l.name).forEach(function (layer) {
          layer.source = l.name;
          layer['source-layer'] = l.name;
          map.addLayer(layer);
        });
        var li = document.createElement('li');
        li.textContent = l.name + ' (' + l.geometry + ')';
        ul.appendChild(li);
      });
      setStatus(list.layers.length + ' layers');
    }).catch(function (err) { setStatus('Layers: ' + err.message); });
  }

  function reload() {
    map.getStyle().layers.forEach(function (layer) {
      if (layer.id !== 'background') { map.removeLayer(layer.id); }
    });
    Object.keys(map.getStyle().sources).forEach(function (s) { map.removeSource(s); });
    return addLayers();
  }

  document.getElementById('keyform').addEventListener('submit', function (e) {
    e.preventDefault();
    apiKey = keyInput.value.trim();
    if (apiKey) { sessionStorage.setItem(KEY, apiKey); } else { sessionStorage.removeItem(KEY); }
    reload();
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

  map.on('load', addLayers);
})();
