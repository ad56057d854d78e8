"""Read a geogate collection with OWSLib's OGC API Features client.

Usage: owslib_client.py BASE_URL KEY_ID SECRET COLLECTION BBOX

The key goes in as Basic credentials through OWSLib's auth= argument.
Prints one JSON object: the collection's id and the features of BBOX
(minx,miny,maxx,maxy), read page by page with the next links.
"""
import json
import sys

from owslib.ogcapi.features import Features
from owslib.util import Authentication, http_get


def main():
    base, key_id, secret, collection, bbox = sys.argv[1:6]
    api = Features(base, auth=Authentication(key_id, secret))
    info = api.collection(collection)
    box = [float(v) for v in bbox.split(",")]
    ids = set()
    page = api.collection_items(collection, bbox=box, limit=1000)
    while True:
        for f in page["features"]:
            ids.add(f["id"])
        nxt = [l["href"] for l in page.get("links", []) if l.get("rel") == "next"]
        if not nxt:
            break
        page = fetch(api, nxt[0])
    print(json.dumps({"id": info["id"], "features": len(ids), "ids": sorted(ids)}))


def fetch(api, href):
    """Follows a next link with the same credentials."""
    r = http_get(href, headers=api.headers, auth=api.auth)
    r.raise_for_status()
    return r.json()


if __name__ == "__main__":
    main()
