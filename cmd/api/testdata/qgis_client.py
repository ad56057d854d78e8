"""Drive stock QGIS (python3-qgis, headless) against a geogate service.

Usage: qgis_client.py BASE_URL KEY_ID SECRET OUT_DIR

The key goes in as QGIS users give it: a Basic authentication
configuration in QGIS's own store, named by authcfg in the layer URIs.
Prints one JSON object: the features QGIS read from the places collection
through OGC API Features, and what it rendered from the vector tiles with
geogate's style.
"""
import base64
import json
import os
import sys
import urllib.request

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from qgis.core import (  # noqa: E402
    QgsApplication, QgsAuthMethodConfig, QgsCoordinateReferenceSystem,
    QgsMapBoxGlStyleConversionContext, QgsMapBoxGlStyleConverter,
    QgsMapRendererSequentialJob, QgsMapSettings, QgsRectangle,
    QgsVectorLayer, QgsVectorTileLayer)
from qgis.PyQt.QtCore import QSize  # noqa: E402
from qgis.PyQt.QtGui import QColor  # noqa: E402


def basic_config(key_id, secret):
    """Stores a Basic authentication configuration and returns its id."""
    am = QgsApplication.authManager()
    am.setMasterPassword("geogate-test", True)
    cfg = QgsAuthMethodConfig("Basic")
    cfg.setName("geogate")
    cfg.setConfig("username", key_id)
    cfg.setConfig("password", secret)
    ok, cfg = am.storeAuthenticationConfig(cfg)
    if not ok:
        sys.exit("could not store the authentication configuration")
    return cfg.id()


def read_features(base, authcfg):
    uri = f"url='{base}' typename='places' authcfg='{authcfg}'"
    layer = QgsVectorLayer(uri, "places", "OAPIF")
    if not layer.isValid():
        sys.exit("the OAPIF layer is not valid: " + layer.error().summary())
    ids = set()
    for f in layer.getFeatures():
        ids.add(f["id"])
    return {"valid": True, "features": len(ids)}


def fetch_style(base, key_id, secret):
    req = urllib.request.Request(base + "/styles/default")
    token = base64.b64encode(f"{key_id}:{secret}".encode()).decode()
    req.add_header("Authorization", "Basic " + token)
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def render_tiles(base, key_id, secret, authcfg, out_dir):
    style = fetch_style(base, key_id, secret)
    source = style["sources"]["places"]
    tiles = source["tiles"][0]
    uri = f"type=xyz&url={tiles}&zmin={source['minzoom']}&zmax={source['maxzoom']}&authcfg={authcfg}"
    layer = QgsVectorTileLayer(uri, "places tiles")
    if not layer.isValid():
        sys.exit("the vector tile layer is not valid")
    style["layers"] = [l for l in style["layers"] if l.get("source") in (None, "places")]
    converter = QgsMapBoxGlStyleConverter()
    converter.convert(style, QgsMapBoxGlStyleConversionContext())
    if converter.renderer() is None:
        sys.exit("QGIS could not convert geogate's style: " + "; ".join(converter.warnings()))
    layer.setRenderer(converter.renderer())

    settings = QgsMapSettings()
    settings.setLayers([layer])
    settings.setDestinationCrs(QgsCoordinateReferenceSystem("EPSG:3857"))
    settings.setExtent(QgsRectangle(1390000, 6790000, 1600000, 6940000))  # around Berlin
    settings.setOutputSize(QSize(256, 256))
    settings.setBackgroundColor(QColor(255, 255, 255))
    job = QgsMapRendererSequentialJob(settings)
    job.start()
    job.waitForFinished()
    img = job.renderedImage()
    img.save(os.path.join(out_dir, "qgis-tiles.png"))
    # The style paints a background; what is drawn on it is every pixel
    # of another colour than the commonest.
    colours = {}
    for y in range(img.height()):
        for x in range(img.width()):
            p = img.pixel(x, y)
            colours[p] = colours.get(p, 0) + 1
    pixels = img.width() * img.height()
    return {"pixels": pixels, "drawn": pixels - max(colours.values())}


def main():
    base, key_id, secret, out_dir = sys.argv[1:5]
    app = QgsApplication([], False)
    app.initQgis()
    try:
        authcfg = basic_config(key_id, secret)
        out = {"oapif": read_features(base, authcfg),
               "tiles": render_tiles(base, key_id, secret, authcfg, out_dir)}
    finally:
        app.exitQgis()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
