-- The newest fencing token handed out, and each requested turn's current token (0 for a turn with
-- no row), in the order requested. A sequence's last_value is the newest value nextval returned
-- in any session (the sequence does not cache values per session), committed or not.
SELECT (SELECT last_value FROM fencing_token_seq),
       coalesce(array_agg(coalesce(t.fencing_token, 0) ORDER BY r.ord), '{}')
FROM unnest($1::uuid[]) WITH ORDINALITY AS r(turn_id, ord)
LEFT JOIN turns t ON t.turn_id = r.turn_id
