SELECT s.last_seq, (SELECT min(f.seq) FROM session_history f WHERE f.session_id = s.session_id),
    h.seq, h.turn_id::text, h.question, h.answer
FROM sessions s
LEFT JOIN session_history h ON h.session_id = s.session_id AND h.seq > $2
WHERE s.session_id = $1
ORDER BY h.seq
