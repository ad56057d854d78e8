"""The seed design written as the FastAPI service a team would otherwise build.

It is the baseline that geogate is measured against in `make bench`: the
seed's sliding-window Lua script called by SHA from a FastAPI dependency,
keyed on x-api-key or the client address, in front of a /within route that
runs an ST_DWithin query through asyncpg and answers GeoJSON, plus a cheap
limited route for the limiter-only case. Settings: DATABASE_URL, REDIS_URL,
SEED_TABLE (places: the table /within reads).
"""
import json
import os
import time

import asyncpg
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from redis.asyncio import Redis

SCRIPT = """
local key    = KEYS[1]
local now    = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit  = tonumber(ARGV[3])
local member = ARGV[4]
redis.call('ZREMRANGEBYSCORE', key, 0, now - window)
local used = redis.call('ZCARD', key)
if used < limit then
    redis.call('ZADD', key, now, member)
    redis.call('PEXPIRE', key, window)
    return {1, limit - used - 1}
end
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
return {0, window - (now - tonumber(oldest[2]))}
"""

WITHIN_SQL = """
SELECT id, name, properties::text, ST_AsGeoJSON(geom)::text,
       ST_Distance(geom::geography, ST_SetSRID(ST_MakePoint($1, $2), 4326)::geography, true)
FROM {table}
WHERE ST_DWithin(geom::geography, ST_SetSRID(ST_MakePoint($1, $2), 4326)::geography, $3)
ORDER BY 5, id
LIMIT 100
""".format(table=os.environ.get("SEED_TABLE", "places"))

app = FastAPI()
LIMIT = int(os.environ.get("SEED_LIMIT", "10"))
WINDOW_MS = int(os.environ.get("SEED_WINDOW_MS", "1000"))
POOL = int(os.environ.get("SEED_POOL", "16"))


@app.on_event("startup")
async def startup():
    app.state.redis = Redis.from_url(os.environ["REDIS_URL"])
    app.state.sha = await app.state.redis.script_load(SCRIPT)
    app.state.pool = await asyncpg.create_pool(os.environ["DATABASE_URL"], min_size=min(4, POOL), max_size=POOL)


async def enforce_limit(request: Request):
    identity = request.headers.get("x-api-key") or request.client.host
    now_ms = int(time.time() * 1000)
    member = f"{now_ms}:{time.perf_counter_ns()}"
    key = f"seed:geofence:{identity}"
    try:
        allowed, meta = await app.state.redis.evalsha(app.state.sha, 1, key, now_ms, WINDOW_MS, LIMIT, member)
    except Exception as exc:
        if "NOSCRIPT" not in str(exc):
            raise
        app.state.sha = await app.state.redis.script_load(SCRIPT)
        allowed, meta = await app.state.redis.evalsha(app.state.sha, 1, key, now_ms, WINDOW_MS, LIMIT, member)
    if allowed != 1:
        retry = max(1, round(int(meta) / 1000))
        raise HTTPException(status_code=429, detail="Rate limit exceeded.",
                            headers={"Retry-After": str(retry)})


@app.get("/limited", dependencies=[Depends(enforce_limit)])
async def limited():
    return {"ok": True}


@app.get("/within", dependencies=[Depends(enforce_limit)])
async def within(lng: float = Query(..., ge=-180, le=180), lat: float = Query(..., ge=-90, le=90),
                 radius: float = Query(..., gt=0, le=100000)):
    async with app.state.pool.acquire() as conn:
        rows = await conn.fetch(WITHIN_SQL, lng, lat, radius)
    features = []
    for fid, name, props, geometry, dist in rows:
        properties = json.loads(props)
        properties["name"] = name
        properties["distance_m"] = dist
        features.append({"type": "Feature", "id": fid, "geometry": json.loads(geometry), "properties": properties})
    return {"type": "FeatureCollection", "features": features}
