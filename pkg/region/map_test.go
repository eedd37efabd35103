package region_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
)

// specMap is the example of the agreed design.
const specMap = `{"regions": [{"code": "euw1", "url": "http://127.0.0.1:18080"}, {"code": "use1", "url": "http://127.0.0.1:28080"}],
 "default_home": "euw1",
 "tenants": [{"name": "acme", "home": "euw1", "policy": "wait", "key_ids": ["euw1-3f9a0c1d2e4b"]},
             {"name": "globex", "home": "use1", "policy": "failover", "key_ids": ["use1-8a7b6c5d4e3f"]}]}`

func mustParse(t *testing.T, doc string) *region.Map {
	t.Helper()
	m, err := region.Parse([]byte(doc))
	require.NoError(t, err)
	return m
}

func TestParse(t *testing.T) {
	t.Parallel()
	t.Run("Spec", func(t *testing.T) {
		t.Parallel()
		m := mustParse(t, specMap)
		r, ok := m.Region("use1")
		require.True(t, ok)
		require.Equal(t, "http://127.0.0.1:28080", r.URL)
		_, ok = m.Region("apse2")
		require.False(t, ok)
	})
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		m := mustParse(t, `{"regions":[{"code":"use1","url":"https://us.example"},{"code":"euw1","url":"https://eu.example"}],
			"tenants":[{"name":"acme"}]}`)
		require.Equal(t, "use1", m.DefaultHome, "the first region")
		require.Equal(t, region.Tenant{Name: "acme", Home: "use1", Policy: region.PolicyWait}, m.Tenants[0])
	})
	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		cases := map[string]struct{ doc, want string }{
			"NoRegions":      {`{"regions":[]}`, "at least one region"},
			"BadCode":        {`{"regions":[{"code":"EU","url":"http://a"}]}`, `regions[0].code "EU"`},
			"DuplicateCode":  {`{"regions":[{"code":"eu","url":"http://a"},{"code":"eu","url":"http://b"}]}`, "listed twice"},
			"RelativeURL":    {`{"regions":[{"code":"eu","url":"/x"}]}`, "absolute http(s) URL"},
			"BadScheme":      {`{"regions":[{"code":"eu","url":"ftp://a"}]}`, "absolute http(s) URL"},
			"UnknownHome":    {`{"regions":[{"code":"eu","url":"http://a"}],"default_home":"us"}`, `default_home "us"`},
			"TenantHome":     {`{"regions":[{"code":"eu","url":"http://a"}],"tenants":[{"name":"a","home":"us"}]}`, `tenants[0].home "us"`},
			"Policy":         {`{"regions":[{"code":"eu","url":"http://a"}],"tenants":[{"name":"a","policy":"retry"}]}`, "wait or failover"},
			"TenantTwice":    {`{"regions":[{"code":"eu","url":"http://a"}],"tenants":[{"name":"a"},{"name":"a"}]}`, `"a": listed twice`},
			"NoTenantName":   {`{"regions":[{"code":"eu","url":"http://a"}],"tenants":[{}]}`, "must be a tenant name"},
			"BadKeyID":       {`{"regions":[{"code":"eu","url":"http://a"}],"tenants":[{"name":"a","key_ids":["xyz"]}]}`, "not an API key ID"},
			"KeyIDTwice":     {`{"regions":[{"code":"eu","url":"http://a"}],"tenants":[{"name":"a","key_ids":["3f9a0c1d2e4b"]},{"name":"b","key_ids":["3f9a0c1d2e4b"]}]}`, `already listed by tenant "a"`},
			"UnknownMember":  {`{"regions":[{"code":"eu","url":"http://a"}],"default":"eu"}`, "unknown field"},
			"TwoValues":      {`{"regions":[{"code":"eu","url":"http://a"}]} {}`, "more than one JSON value"},
			"NotJSON":        {`regions: eu`, "region map"},
			"EveryViolation": {`{"regions":[{"code":"E","url":"x"}]}`, `code "E": region code must be 2-8 characters of [a-z][a-z0-9]{1,7}; regions[0].url "x"`},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				_, err := region.Parse([]byte(tc.doc))
				require.ErrorContains(t, err, tc.want)
			})
		}
	})
}

func TestLoad(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "regions.json")
	require.NoError(t, os.WriteFile(file, []byte(specMap), 0o600))
	fromFile, err := region.Load(file, "")
	require.NoError(t, err)
	inline, err := region.Load("", specMap)
	require.NoError(t, err)
	require.Equal(t, fromFile, inline)

	none, err := region.Load("", "")
	require.NoError(t, err)
	require.Nil(t, none)
	_, err = region.Load(file, specMap)
	require.ErrorIs(t, err, region.ErrBothSources)
	_, err = region.Load(filepath.Join(t.TempDir(), "missing.json"), "")
	require.ErrorContains(t, err, "read region map")
}

func TestOwner(t *testing.T) {
	t.Parallel()
	m := mustParse(t, specMap)
	for id, want := range map[string]string{
		"euw1-0192f3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b": "euw1",
		"use1-chat-7":          "use1",
		"use1-":                "use1",
		"apse2-0192f3c4-aaaa":  "",
		"chat-7":               "",
		"0192f3c4-5d6e-7f80":   "",
		"use1":                 "",
		"":                     "",
		"USE1-0192f3c4-5d6e-7": "",
	} {
		code, ok := m.Owner(id)
		require.Equal(t, want != "", ok, id)
		require.Equal(t, want, code, id)
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	m := mustParse(t, `{"regions":[{"code":"aa","url":"http://a"},{"code":"bb","url":"http://b"},{"code":"cc","url":"http://c"}]}`)
	up := func(codes ...string) func(string) bool {
		return func(c string) bool { return strings.Contains(strings.Join(codes, ","), c) }
	}
	next := func(from string, healthy func(string) bool) string {
		r, ok := m.Next(from, healthy)
		if !ok {
			return ""
		}
		return r.Code
	}
	require.Equal(t, "bb", next("aa", up("aa", "bb", "cc")))
	require.Equal(t, "cc", next("aa", up("cc")))
	require.Equal(t, "aa", next("cc", up("aa", "bb")), "wraps")
	require.Equal(t, "aa", next("bb", up("aa")), "wraps past the end")
	require.Empty(t, next("aa", up("aa")), "never the region itself")
	require.Empty(t, next("aa", up()))
	require.Equal(t, "aa", next("zz", up("aa", "bb")), "an unknown region starts at the first")
}

func TestTenant(t *testing.T) {
	t.Parallel()
	m := mustParse(t, specMap)
	secret := strings.Repeat("A", 43)
	acme := region.Tenant{Name: "acme", Home: "euw1", Policy: region.PolicyWait, KeyIDs: []string{"euw1-3f9a0c1d2e4b"}}
	globex := region.Tenant{Name: "globex", Home: "use1", Policy: region.PolicyFailover, KeyIDs: []string{"use1-8a7b6c5d4e3f"}}
	dflt := region.Tenant{Name: "default", Home: "euw1", Policy: region.PolicyWait}
	cases := map[string]struct {
		key  string
		want region.Tenant
	}{
		"Listed":            {"ts_euw1-3f9a0c1d2e4b_" + secret, acme},
		"ListedFailover":    {"ts_use1-8a7b6c5d4e3f_" + secret, globex},
		"SecretWithUnders":  {"ts_use1-8a7b6c5d4e3f_a_b-c", globex},
		"PrefixNamesHome":   {"ts_use1-000000000000_" + secret, region.Tenant{Home: "use1", Policy: region.PolicyWait}},
		"UnknownPrefix":     {"ts_apse2-000000000000_" + secret, dflt},
		"LegacyUnlisted":    {"ts_3f9a0c1d2e4b_" + secret, dflt},
		"NoKey":             {"", dflt},
		"NotAKey":           {"Bearer xyz", dflt},
		"IDWithoutSecret":   {"ts_euw1-3f9a0c1d2e4b", dflt},
		"UppercaseKeyIDHex": {"ts_euw1-3F9A0C1D2E4B_" + secret, dflt},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, m.Tenant(tc.key))
		})
	}
	t.Run("ByKeyID", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, globex, m.TenantOfKeyID("use1-8a7b6c5d4e3f"), "a stream token's API key ID places it as the key would")
		require.Equal(t, region.Tenant{Home: "use1", Policy: region.PolicyWait}, m.TenantOfKeyID("use1-000000000000"))
		require.Equal(t, dflt, m.TenantOfKeyID(""))
		require.Equal(t, dflt, m.TenantOfKeyID("not-a-key-id"))
	})
	t.Run("ListedDefault", func(t *testing.T) {
		t.Parallel()
		m := mustParse(t, `{"regions":[{"code":"euw1","url":"http://a"},{"code":"use1","url":"http://b"}],
			"tenants":[{"name":"default","home":"use1","policy":"failover"}]}`)
		require.Equal(t, region.Tenant{Name: "default", Home: "use1", Policy: region.PolicyFailover}, m.Tenant(""))
	})
}

func TestKeyID(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"ts_3f9a0c1d2e4b_secret":      "3f9a0c1d2e4b",
		"ts_euw1-3f9a0c1d2e4b_s_e-c":  "euw1-3f9a0c1d2e4b",
		"ts_euw1-3f9a0c1d2e4_secret":  "",
		"ts_3f9a0c1d2e4b":             "",
		"xs_3f9a0c1d2e4b_secret":      "",
		"ts__secret":                  "",
		"ts_EUW1-3f9a0c1d2e4b_secret": "",
	} {
		id, ok := region.KeyID(key)
		require.Equal(t, want != "", ok, key)
		require.Equal(t, want, id, key)
	}
}

func TestProblems(t *testing.T) {
	t.Parallel()
	decode := func(t *testing.T, p httpx.Problem) (*httptest.ResponseRecorder, map[string]any) {
		t.Helper()
		rec := httptest.NewRecorder()
		httpx.WriteProblem(rec, p)
		var body map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		return rec, body
	}
	rec, body := decode(t, region.Misdirected("use1"))
	require.Equal(t, http.StatusMisdirectedRequest, rec.Code)
	require.Equal(t, httpx.ProblemMisdirected.URI(), body["type"])
	require.Equal(t, "use1", body["region"])

	rec, body = decode(t, region.Unavailable("euw1", 2*time.Second))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "2", rec.Header().Get("Retry-After"))
	require.Equal(t, httpx.ProblemRegionUnavailable.URI(), body["type"])
	require.Equal(t, "euw1", body["region"])
}

// FuzzParse: any document either fails with an error or yields a map whose every rule holds.
func FuzzParse(f *testing.F) {
	f.Add(specMap)
	f.Add(`{"regions":[{"code":"eu","url":"http://a"}],"tenants":[{"name":"a","key_ids":["3f9a0c1d2e4b"]}]}`)
	f.Add(`{"regions":[{"code":"eu","url":"http://a"}]} {}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, doc string) {
		m, err := region.Parse([]byte(doc))
		if err != nil {
			return
		}
		if _, ok := m.Region(m.DefaultHome); !ok {
			t.Fatalf("default_home %q is not a region", m.DefaultHome)
		}
		for _, tn := range m.Tenants {
			if _, ok := m.Region(tn.Home); !ok || (tn.Policy != region.PolicyWait && tn.Policy != region.PolicyFailover) {
				t.Fatalf("tenant %+v accepted", tn)
			}
			for _, id := range tn.KeyIDs {
				if got := m.Tenant("ts_" + id + "_x"); got.Name != tn.Name {
					t.Fatalf("key %s resolves to %q, not %q", id, got.Name, tn.Name)
				}
			}
		}
	})
}

// FuzzKeyID: whatever KeyID reads out of a key is a well-formed key ID that the key starts with.
func FuzzKeyID(f *testing.F) {
	for _, seed := range []string{"ts_3f9a0c1d2e4b_secret", "ts_euw1-3f9a0c1d2e4b_s", "ts__", "ts_", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		id, ok := region.KeyID(key)
		if !ok {
			return
		}
		if !region.ValidKeyID(id) || !strings.HasPrefix(key, "ts_"+id+"_") {
			t.Fatalf("%q: read key ID %q", key, id)
		}
	})
}
