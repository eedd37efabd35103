package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/threads"
)

// Bounds of a thread search.
const (
	// searchLimitMax is the most threads one search answers.
	searchLimitMax = 1000
	// searchScanMax is the most threads a search with a values filter reads to filter them: values
	// are the thread's runs, read through the native API, not a column to filter in SQL.
	searchScanMax = 1000
)

type searchBody struct {
	Metadata  json.RawMessage `json:"metadata"`
	Values    json.RawMessage `json:"values"`
	IDs       []string        `json:"ids"`
	Status    string          `json:"status"`
	Limit     *int            `json:"limit"`
	Offset    int             `json:"offset"`
	SortBy    string          `json:"sort_by"`
	SortOrder string          `json:"sort_order"`
	Extract   json.RawMessage `json:"extract"`
}

// searchThreads answers POST /threads/search (the SDK's threads.search, which chat front ends
// list their thread sidebar with): the tenant's threads filtered by metadata (containment), IDs,
// status and values (containment), sorted and paged, each with its values (values.messages).
func (h *Handler) searchThreads(w http.ResponseWriter, r *http.Request) {
	const route = "search_threads"
	c, p := h.authenticate(r)
	if p != nil {
		h.refuse(w, route, *p)
		return
	}
	var body searchBody
	if p := h.decodeBody(w, r, &body); p != nil {
		h.refuse(w, route, *p)
		return
	}
	q := threads.Query{Metadata: body.Metadata, IDs: body.IDs, Status: body.Status, SortBy: body.SortBy, Offset: body.Offset, Limit: 10, Desc: true}
	if body.Limit != nil {
		q.Limit = *body.Limit
	}
	if q.SortBy == "" {
		q.SortBy = "created_at" // the Platform's default order: newest first
	}
	refusal := ""
	switch {
	case isSet(body.Metadata) && !isObject(body.Metadata):
		refusal = "metadata must be an object"
	case isSet(body.Values) && !isObject(body.Values):
		refusal = "values must be an object"
	case body.Status != "" && body.Status != threads.StatusIdle && body.Status != threads.StatusBusy &&
		body.Status != threads.StatusErr && body.Status != "interrupted":
		refusal = "status must be idle, busy, interrupted or error"
	case q.Limit < 1 || q.Limit > searchLimitMax:
		refusal = fmt.Sprintf("limit must be between 1 and %d", searchLimitMax)
	case q.Offset < 0:
		refusal = "offset must not be negative"
	case threads.SortColumns[q.SortBy] == "":
		refusal = "sort_by must be thread_id, status, created_at or updated_at"
	case body.SortOrder != "" && body.SortOrder != "asc" && body.SortOrder != "desc":
		refusal = "sort_order must be asc or desc"
	case isSet(body.Extract):
		refusal = "extract is not supported: a thread's values are its messages, answered whole"
	}
	if refusal != "" {
		h.refuse(w, route, httpx.ProblemValidation.Problem(refusal))
		return
	}
	q.Desc = body.SortOrder != "asc"
	var want any
	filterValues := isSet(body.Values)
	if filterValues {
		_ = json.Unmarshal(body.Values, &want)
		q.Limit, q.Offset = searchScanMax, 0
	}
	if body.Status == "interrupted" {
		// turnstile's runs never pause for input: no thread is interrupted.
		h.ok(route)
		httpx.WriteJSON(w, http.StatusOK, []threadJSON{})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	listed, err := h.threads.Search(ctx, c.tenant, q)
	cancel()
	if err != nil {
		h.log.WarnContext(r.Context(), "search threads failed", "err", err)
		h.refuse(w, route, h.storeDown("threads cannot be searched now"))
		return
	}
	out := make([]threadJSON, 0, len(listed))
	skip := body.Offset
	for _, l := range listed {
		tj, err := h.viewThread(r.Context(), c, l.Thread)
		if err != nil {
			h.relay(w, r, route, err)
			return
		}
		if filterValues {
			if !contains(tj.Values, want) {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
		}
		out = append(out, tj)
		if filterValues && len(out) == *orDefault(body.Limit, 10) {
			break
		}
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, out)
}

func orDefault(p *int, d int) *int {
	if p == nil {
		return &d
	}
	return p
}

// viewThread is the Thread th is: its status and values read from its runs.
func (h *Handler) viewThread(ctx context.Context, c caller, th threads.Thread) (threadJSON, error) {
	v, err := h.viewOf(ctx, c, th, th.ID)
	if err != nil {
		return threadJSON{}, err
	}
	out := threadJSON{
		ThreadID: th.ID, CreatedAt: th.CreatedAt, UpdatedAt: th.UpdatedAt, Metadata: th.Metadata,
		Status: threadStatus(v.turns), Values: map[string]any{}, Interrupts: map[string]any{},
	}
	if msgs := v.messages(); len(msgs) > 0 || v.baseCP != "" {
		out.Values = map[string]any{"messages": msgs}
	}
	return out, nil
}

// contains says whether the JSON value have contains want as Postgres's jsonb @> does: an
// object's members contained member by member, an array containing each of want's elements, a
// scalar equal.
func contains(have, want any) bool {
	b, _ := json.Marshal(have)
	var h any
	_ = json.Unmarshal(b, &h)
	return jsonContains(h, want)
}

func jsonContains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		hm, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := hm[k]
			if !ok || !jsonContains(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		ha, ok := have.([]any)
		if !ok {
			return false
		}
		for _, wv := range w {
			found := false
			for _, hv := range ha {
				if jsonContains(hv, wv) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(have, want)
}

type patchBody struct {
	Metadata json.RawMessage `json:"metadata"`
	TTL      json.RawMessage `json:"ttl"`
}

// patchThread answers PATCH /threads/{thread_id} (the SDK's threads.update): the metadata sent is
// merged into the thread's, key by key.
func (h *Handler) patchThread(w http.ResponseWriter, r *http.Request) {
	const route = "update_thread"
	c, th, ok := h.thread(w, r, route)
	if !ok {
		return
	}
	var body patchBody
	if p := h.decodeBody(w, r, &body); p != nil {
		h.refuse(w, route, *p)
		return
	}
	switch {
	case isSet(body.TTL):
		h.refuse(w, route, httpx.ProblemValidation.Problem("ttl is not supported: a thread idle for TURNSTILE_LANGGRAPH_THREAD_TTL is deleted"))
		return
	case isSet(body.Metadata) && !isObject(body.Metadata):
		h.refuse(w, route, httpx.ProblemValidation.Problem("metadata must be an object"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	updated, err := h.threads.Patch(ctx, c.tenant, th.ID, body.Metadata, h.cfg.MetadataMax)
	cancel()
	switch {
	case errors.Is(err, threads.ErrNotFound):
		h.refuse(w, route, httpx.ProblemThreadNotFound.Problem("no thread "+th.ID))
		return
	case errors.Is(err, threads.ErrTooLarge):
		h.refuse(w, route, httpx.ProblemValidation.Problem(fmt.Sprintf(
			"the merged metadata would be over the %d bytes a thread's metadata may have (TURNSTILE_LANGGRAPH_METADATA_MAX)", h.cfg.MetadataMax)))
		return
	case err != nil:
		h.log.WarnContext(r.Context(), "update thread failed", "session_id", th.ID, "err", err)
		h.refuse(w, route, h.storeDown("the thread cannot be updated now"))
		return
	}
	tj, err := h.viewThread(r.Context(), c, updated)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, tj)
}
