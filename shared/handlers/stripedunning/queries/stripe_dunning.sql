-- Queries on stripe_dunning, the example business table of this package
-- (see its migration for why each column merges as it does: deliveries
-- come out of order).
;

-- name: StripeDunningRecordFailure :exec
-- A failed payment of an invoice. The row's failure details follow the
-- failure with the highest attempt count; ties keep the row (a redelivery
-- changes nothing); a cleared invoice stays cleared.
INSERT INTO stripe_dunning AS d (source, invoice_id, customer_id, status, failed_attempts, amount_due, currency,
                                 next_payment_attempt, hosted_invoice_url, first_failed_at, last_failed_at, last_event_id)
VALUES (@source::text, @invoice_id::text, @customer_id::text, 'past_due', @failed_attempts::int, @amount_due::bigint,
        @currency::text, sqlc.narg('next_payment_attempt')::timestamptz, sqlc.narg('hosted_invoice_url')::text,
        @failed_at::timestamptz, @failed_at::timestamptz, @event_id::text)
ON CONFLICT (source, invoice_id) DO UPDATE SET
    failed_attempts      = GREATEST(d.failed_attempts, EXCLUDED.failed_attempts),
    amount_due           = CASE WHEN EXCLUDED.failed_attempts > d.failed_attempts THEN EXCLUDED.amount_due ELSE d.amount_due END,
    currency             = CASE WHEN EXCLUDED.failed_attempts > d.failed_attempts THEN EXCLUDED.currency ELSE d.currency END,
    next_payment_attempt = CASE WHEN EXCLUDED.failed_attempts > d.failed_attempts THEN EXCLUDED.next_payment_attempt ELSE d.next_payment_attempt END,
    hosted_invoice_url   = CASE WHEN EXCLUDED.failed_attempts > d.failed_attempts THEN EXCLUDED.hosted_invoice_url ELSE d.hosted_invoice_url END,
    last_event_id        = CASE WHEN EXCLUDED.failed_attempts > d.failed_attempts THEN EXCLUDED.last_event_id ELSE d.last_event_id END,
    first_failed_at      = LEAST(d.first_failed_at, EXCLUDED.first_failed_at),
    last_failed_at       = GREATEST(d.last_failed_at, EXCLUDED.last_failed_at),
    updated_at           = now();

-- name: StripeDunningClear :exec
-- A paid invoice: cleared for ever.
INSERT INTO stripe_dunning AS d (source, invoice_id, customer_id, status, amount_due, currency, cleared_at, last_event_id)
VALUES (@source::text, @invoice_id::text, @customer_id::text, 'cleared', @amount_due::bigint, @currency::text,
        @cleared_at::timestamptz, @event_id::text)
ON CONFLICT (source, invoice_id) DO UPDATE SET
    status        = 'cleared',
    cleared_at    = coalesce(d.cleared_at, EXCLUDED.cleared_at),
    last_event_id = EXCLUDED.last_event_id,
    updated_at    = now();

-- name: StripeDunningGet :one
SELECT * FROM stripe_dunning WHERE source = @source::text AND invoice_id = @invoice_id::text;

-- name: StripeDunningListOpen :many
-- The invoices of a customer in dunning, served by
-- stripe_dunning_open_by_customer_idx.
SELECT * FROM stripe_dunning
 WHERE source = @source::text AND customer_id = @customer_id::text AND status = 'past_due'
 ORDER BY first_failed_at, invoice_id;
