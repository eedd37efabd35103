package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/store"
)

// Bounds of store items that no variable sets.
const (
	// storeLabelMax bounds a namespace label and storeKeyMax a key, in bytes.
	storeLabelMax = 256
	storeKeyMax   = 1024
	// storeDepthMax bounds a namespace's labels.
	storeDepthMax = 16
	// storePageMax bounds limit of searchItems and listNamespaces.
	storePageMax = 1000
)

// itemJSON is LangGraph's Item (a SearchItem has score, always null here).
type itemJSON struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	Score     *float64        `json:"score,omitempty"`
}

func viewItem(it store.Item) itemJSON {
	return itemJSON{Namespace: it.Namespace, Key: it.Key, Value: it.Value, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}
}

// checkNamespace is the refusal of a namespace, or "". Labels are not empty and hold no "."
// (the SDK joins them with "." in a query string).
func checkNamespace(what string, ns []string, empty bool) string {
	if len(ns) == 0 && !empty {
		return what + " must have at least one label"
	}
	if len(ns) > storeDepthMax {
		return fmt.Sprintf("%s has %d labels, more than %d", what, len(ns), storeDepthMax)
	}
	for _, l := range ns {
		if l == "" || strings.Contains(l, ".") || len(l) > storeLabelMax {
			return fmt.Sprintf("%s labels must be 1-%d bytes without '.'", what, storeLabelMax)
		}
	}
	return ""
}

func checkKey(key string) string {
	if key == "" || len(key) > storeKeyMax {
		return fmt.Sprintf("key must be 1-%d bytes", storeKeyMax)
	}
	return ""
}

// semanticRefusal is the answer to a semantic search or an index request.
const semanticRefusal = "is not supported: turnstile's store has no vector index (semantic search); search by namespace_prefix and filter"

type putItemBody struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	Index     json.RawMessage `json:"index"`
	TTL       *float64        `json:"ttl"`
}

// storeCall authenticates a store route's request and reads its JSON body into v (nil: none).
func (h *Handler) storeCall(w http.ResponseWriter, r *http.Request, route string, v any) (caller, bool) {
	c, p := h.authenticate(r)
	if p == nil && v != nil {
		p = h.decodeBody(w, r, v)
	}
	if p != nil {
		h.refuse(w, route, *p)
		return c, false
	}
	return c, true
}

func (h *Handler) storeFailed(w http.ResponseWriter, r *http.Request, route string, err error) {
	h.log.WarnContext(r.Context(), "store failed", "route", route, "err", err)
	h.refuse(w, route, h.storeDown("the store cannot be reached now"))
}

// putItem answers PUT /store/items (store.putItem): 204 once stored.
func (h *Handler) putItem(w http.ResponseWriter, r *http.Request) {
	const route = "put_item"
	var b putItemBody
	c, ok := h.storeCall(w, r, route, &b)
	if !ok {
		return
	}
	refusal := checkNamespace("namespace", b.Namespace, false)
	switch {
	case refusal != "":
	case checkKey(b.Key) != "":
		refusal = checkKey(b.Key)
	case !isObject(b.Value):
		refusal = "value must be an object"
	case isSet(b.Index) && string(b.Index) != "false":
		refusal = "index " + semanticRefusal
	case b.TTL != nil && (*b.TTL <= 0 || *b.TTL > 60*24*365*10):
		refusal = "ttl must be a positive number of minutes, at most ten years"
	}
	if refusal != "" {
		h.refuse(w, route, httpx.ProblemValidation.Problem(refusal))
		return
	}
	if len(b.Value) > h.cfg.StoreValueMax {
		h.refuse(w, route, httpx.ProblemBodyTooLarge.Problem(fmt.Sprintf(
			"value is %d bytes, over the %d bytes an item may hold (TURNSTILE_LANGGRAPH_STORE_VALUE_MAX)", len(b.Value), h.cfg.StoreValueMax)))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	err := store.New(h.pool).Put(ctx, c.tenant, b.Namespace, b.Key, b.Value, b.TTL, h.cfg.StoreItemsMax)
	if errors.Is(err, store.ErrLimit) {
		h.refuse(w, route, httpx.ProblemStoreItemsLimit.Problem(fmt.Sprintf(
			"the tenant has %d store items, the most it may have (TURNSTILE_LANGGRAPH_STORE_ITEMS_MAX): delete one first", h.cfg.StoreItemsMax)))
		return
	}
	if err != nil {
		h.storeFailed(w, r, route, err)
		return
	}
	h.ok(route)
	w.WriteHeader(http.StatusNoContent)
}

// getItem answers GET /store/items?namespace=a.b&key=k (store.getItem): the item, or null.
func (h *Handler) getItem(w http.ResponseWriter, r *http.Request) {
	const route = "get_item"
	c, ok := h.storeCall(w, r, route, nil)
	if !ok {
		return
	}
	q := r.URL.Query()
	var ns []string
	if v := q.Get("namespace"); v != "" {
		ns = strings.Split(v, ".")
	}
	refusal := checkNamespace("namespace", ns, false)
	if refusal == "" {
		refusal = checkKey(q.Get("key"))
	}
	if refusal != "" {
		h.refuse(w, route, httpx.ProblemValidation.Problem(refusal))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	it, found, err := store.New(h.pool).Get(ctx, c.tenant, ns, q.Get("key"), q.Get("refresh_ttl") != "false")
	if err != nil {
		h.storeFailed(w, r, route, err)
		return
	}
	h.ok(route)
	if !found {
		httpx.WriteJSON(w, http.StatusOK, nil)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, viewItem(it))
}

// deleteItem answers DELETE /store/items (store.deleteItem): 204 whether or not it was there.
func (h *Handler) deleteItem(w http.ResponseWriter, r *http.Request) {
	const route = "delete_item"
	var b struct {
		Namespace []string `json:"namespace"`
		Key       string   `json:"key"`
	}
	c, ok := h.storeCall(w, r, route, &b)
	if !ok {
		return
	}
	refusal := checkNamespace("namespace", b.Namespace, false)
	if refusal == "" {
		refusal = checkKey(b.Key)
	}
	if refusal != "" {
		h.refuse(w, route, httpx.ProblemValidation.Problem(refusal))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	if err := store.New(h.pool).Delete(ctx, c.tenant, b.Namespace, b.Key); err != nil {
		h.storeFailed(w, r, route, err)
		return
	}
	h.ok(route)
	w.WriteHeader(http.StatusNoContent)
}

// page reads limit (default def) and offset, or a refusal.
func page(limit *int, offset int, def int) (int, string) {
	n := def
	if limit != nil {
		n = *limit
	}
	switch {
	case n < 1 || n > storePageMax:
		return 0, fmt.Sprintf("limit must be from 1 to %d", storePageMax)
	case offset < 0:
		return 0, "offset must not be negative"
	}
	return n, ""
}

// searchItems answers POST /store/items/search (store.searchItems).
func (h *Handler) searchItems(w http.ResponseWriter, r *http.Request) {
	const route = "search_items"
	var b struct {
		Prefix     []string        `json:"namespace_prefix"`
		Filter     json.RawMessage `json:"filter"`
		Limit      *int            `json:"limit"`
		Offset     int             `json:"offset"`
		Query      *string         `json:"query"`
		RefreshTTL *bool           `json:"refresh_ttl"`
	}
	c, ok := h.storeCall(w, r, route, &b)
	if !ok {
		return
	}
	limit, refusal := page(b.Limit, b.Offset, 10)
	if refusal == "" {
		refusal = checkNamespace("namespace_prefix", b.Prefix, true)
	}
	switch {
	case refusal != "":
	case b.Query != nil && *b.Query != "":
		refusal = "query " + semanticRefusal
	case isSet(b.Filter) && !isObject(b.Filter):
		refusal = "filter must be an object"
	case isSet(b.Filter) && strings.Contains(string(b.Filter), `"$`):
		refusal = "filter operators ($eq, $gt, …) are not supported: each filter member must equal the value's"
	}
	if refusal != "" {
		h.refuse(w, route, httpx.ProblemValidation.Problem(refusal))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	items, err := store.New(h.pool).Search(ctx, c.tenant, b.Prefix, b.Filter, limit, b.Offset, b.RefreshTTL == nil || *b.RefreshTTL)
	if err != nil {
		h.storeFailed(w, r, route, err)
		return
	}
	out := make([]itemJSON, len(items))
	for i, it := range items {
		out[i] = viewItem(it)
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"items": out})
}

// listNamespaces answers POST /store/namespaces (store.listNamespaces).
func (h *Handler) listNamespaces(w http.ResponseWriter, r *http.Request) {
	const route = "list_namespaces"
	var b struct {
		Prefix   []string `json:"prefix"`
		Suffix   []string `json:"suffix"`
		MaxDepth *int     `json:"max_depth"`
		Limit    *int     `json:"limit"`
		Offset   int      `json:"offset"`
	}
	c, ok := h.storeCall(w, r, route, &b)
	if !ok {
		return
	}
	limit, refusal := page(b.Limit, b.Offset, 100)
	depth := 0
	if b.MaxDepth != nil {
		depth = *b.MaxDepth
	}
	switch {
	case refusal != "":
	case depth < 0:
		refusal = "max_depth must not be negative"
	case len(b.Prefix) > storeDepthMax || len(b.Suffix) > storeDepthMax:
		refusal = fmt.Sprintf("prefix and suffix may have at most %d labels", storeDepthMax)
	}
	if refusal != "" {
		h.refuse(w, route, httpx.ProblemValidation.Problem(refusal))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	nss, err := store.New(h.pool).ListNamespaces(ctx, c.tenant, b.Prefix, b.Suffix, depth, limit, b.Offset)
	if err != nil {
		h.storeFailed(w, r, route, err)
		return
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"namespaces": nss})
}

// storeRoutes mounts the store's routes under the /store family.
func (h *Handler) storeRoutes(r chi.Router) {
	r.Put("/items", h.putItem)
	r.Get("/items", h.getItem)
	r.Delete("/items", h.deleteItem)
	r.Post("/items/search", h.searchItems)
	r.Post("/namespaces", h.listNamespaces)
}
