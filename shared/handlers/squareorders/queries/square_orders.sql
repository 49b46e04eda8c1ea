-- Queries on square_orders, the example business table of this package.
;

-- name: SquareOrderUpsert :exec
-- Mirrors an order; Square delivers out of order, so a row is only
-- overwritten by a strictly newer version.
INSERT INTO square_orders AS s (source, order_id, merchant_id, location_id, state, version,
                                order_created_at, order_updated_at, last_event_id)
VALUES (@source::text, @order_id::text, sqlc.narg('merchant_id')::text, @location_id::text, @state::text, @version::int,
        sqlc.narg('order_created_at')::timestamptz, sqlc.narg('order_updated_at')::timestamptz, @event_id::text)
ON CONFLICT (source, order_id) DO UPDATE SET
    merchant_id      = EXCLUDED.merchant_id,
    location_id      = EXCLUDED.location_id,
    state            = EXCLUDED.state,
    version          = EXCLUDED.version,
    order_created_at = coalesce(EXCLUDED.order_created_at, s.order_created_at),
    order_updated_at = coalesce(EXCLUDED.order_updated_at, s.order_updated_at),
    last_event_id    = EXCLUDED.last_event_id,
    synced_at        = now()
WHERE s.version < EXCLUDED.version;

-- name: SquareOrderGet :one
SELECT * FROM square_orders WHERE source = @source::text AND order_id = @order_id::text;
