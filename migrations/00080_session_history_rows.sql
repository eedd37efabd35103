-- +goose Up
-- A succeeded turn appends two messages to its session's history, the question and the answer, and
-- they are always appended and read together. Stored as two rows they cost every completion two
-- heap rows and four index entries; as one row, one and two. seq is the answer's sequence
-- number, the question's is seq - 1, so
-- sessions.last_seq and every message's number stay what they were.
CREATE TABLE session_history (
    session_id  text NOT NULL,
    seq         bigint NOT NULL,
    turn_id     uuid NOT NULL,
    question    text NOT NULL,
    answer      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq)
);
CREATE UNIQUE INDEX session_history_turn_idx ON session_history (turn_id);

INSERT INTO session_history (session_id, seq, turn_id, question, answer, created_at)
SELECT a.session_id, a.seq, a.turn_id, coalesce(u.content, ''), a.content, a.created_at
FROM session_messages a
LEFT JOIN session_messages u ON u.turn_id = a.turn_id AND u.role = 'user'
WHERE a.role = 'assistant';

DROP TABLE session_messages;

-- The history as messages, one row each, as the table before this migration held them: for
-- operators' queries and readers that think in messages, and for workers of the previous version
-- during a rolling upgrade, which still read and append messages here. Their appends (a turn's
-- question at seq - 1, then its answer at seq) land in the turn's one row.
CREATE VIEW session_messages AS
SELECT h.session_id, m.seq, h.turn_id, m.role, m.content, h.created_at
FROM session_history h
CROSS JOIN LATERAL (VALUES (h.seq - 1, 'user', h.question), (h.seq, 'assistant', h.answer)) AS m (seq, role, content);

-- +goose StatementBegin
CREATE FUNCTION session_messages_append() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.role = 'user' THEN
        INSERT INTO session_history (session_id, seq, turn_id, question, answer)
        VALUES (NEW.session_id, NEW.seq + 1, NEW.turn_id, NEW.content, '')
        ON CONFLICT (session_id, seq) DO UPDATE SET question = EXCLUDED.question;
    ELSE
        INSERT INTO session_history (session_id, seq, turn_id, question, answer)
        VALUES (NEW.session_id, NEW.seq, NEW.turn_id, '', NEW.content)
        ON CONFLICT (session_id, seq) DO UPDATE SET answer = EXCLUDED.answer;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER session_messages_append INSTEAD OF INSERT ON session_messages
    FOR EACH ROW EXECUTE FUNCTION session_messages_append();

-- +goose Down
DROP VIEW session_messages;
DROP FUNCTION session_messages_append();

CREATE TABLE session_messages (
    session_id  text NOT NULL,
    seq         bigint NOT NULL,
    turn_id     uuid NOT NULL,
    role        text NOT NULL,
    content     text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq)
);
CREATE UNIQUE INDEX session_messages_turn_role_idx ON session_messages (turn_id, role);

INSERT INTO session_messages (session_id, seq, turn_id, role, content, created_at)
SELECT session_id, seq - 1, turn_id, 'user', question, created_at FROM session_history
UNION ALL
SELECT session_id, seq, turn_id, 'assistant', answer, created_at FROM session_history;

DROP TABLE session_history;
