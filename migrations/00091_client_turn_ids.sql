-- +goose Up
-- A turn whose ID the client minted is stored under an ID derived from its tenant and that ID
-- (UUIDv5), so another tenant minting the same ID names a turn of its own. client_turn_id is the
-- ID the client knows the turn by, which the API shows; NULL where it is turn_id itself (or the
-- row was written before the client's ID was recorded).
ALTER TABLE turns ADD COLUMN client_turn_id uuid;

-- +goose Down
ALTER TABLE turns DROP COLUMN client_turn_id;
