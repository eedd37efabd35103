package scrape

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMax(t *testing.T) {
	t.Parallel()
	text := "# HELP turnstile_backlog_age_seconds x\n# TYPE turnstile_backlog_age_seconds gauge\n" +
		"turnstile_backlog_age_seconds_total 99\n" +
		"turnstile_backlog_age_seconds{partition=\"0\"} 1.5\n" +
		"turnstile_backlog_age_seconds{partition=\"1\"} 2.25\n"
	v, ok, err := Max(strings.NewReader(text), "turnstile_backlog_age_seconds")
	require.NoError(t, err)
	require.True(t, ok)
	require.InDelta(t, 2.25, v, 1e-9)

	_, ok, err = Max(strings.NewReader("go_goroutines 4\n"), "turnstile_backlog_age_seconds")
	require.NoError(t, err)
	require.False(t, ok)
}

func TestSums(t *testing.T) {
	t.Parallel()
	text := "m_total{result=\"ok\"} 3\nm_total{result=\"error\"} 1\nm_total_extra 50\n" +
		"b_count{kind=\"publish\"} 7\nb_count{kind=\"claim\"} 2\ng 4.5\n"
	s, err := Sums(strings.NewReader(text), "m_total", `b_count{kind="publish"}`, "g", "absent")
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"m_total": 4, `b_count{kind="publish"}`: 7, "g": 4.5}, s)
}
