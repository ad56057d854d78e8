"""Read one collection with stock QGIS (python3-qgis, headless).

Usage: qgis_read.py BASE_URL KEY_ID SECRET COLLECTION

The key goes in as a Basic authentication configuration in QGIS's own
store, as in qgis_client.py. Prints one JSON object: whether the OAPIF
layer is valid, and the name property of each feature QGIS read, sorted.
"""
import json
import sys

from qgis.core import QgsApplication, QgsVectorLayer

from qgis_client import basic_config


def read(base, authcfg, collection):
    # The layer is gone before QGIS exits: one that outlives exitQgis
    # crashes the interpreter on its way out.
    uri = f"url='{base}' typename='{collection}' authcfg='{authcfg}'"
    layer = QgsVectorLayer(uri, collection, "OAPIF")
    if not layer.isValid():
        return {"valid": False, "names": []}
    return {"valid": True, "names": sorted(str(f["name"]) for f in layer.getFeatures())}


def main():
    base, key_id, secret, collection = sys.argv[1:5]
    app = QgsApplication([], False)
    app.initQgis()
    try:
        out = read(base, basic_config(key_id, secret), collection)
    finally:
        app.exitQgis()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
