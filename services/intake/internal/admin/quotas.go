package admin

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/quota"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// quotaBody is the body of PUT /v1/admin/quotas/{tenant}: the tenant's quota over all its agents,
// or with agent the tenant×agent quota. An absent limit is no limit; the PUT replaces the row.
type quotaBody struct {
	Agent         string `json:"agent"`
	MaxRunning    *int   `json:"max_running"`
	RatePerSecond *int   `json:"rate_per_second"`
	BudgetTokens  *int64 `json:"budget_tokens"`
	BudgetPeriod  string `json:"budget_period"`
}

// listQuotas answers GET /v1/admin/quotas: every quota for an admin, the tenant's own otherwise.
func (h *Handler) listQuotas(w http.ResponseWriter, r *http.Request) {
	tenant := scope(r)
	if tenant == "" {
		tenant = r.URL.Query().Get("tenant")
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	qs, err := quota.NewStore(h.d.Pool).List(ctx, tenant)
	if err != nil {
		h.storeFault(w, r, "reading quotas", err)
		return
	}
	if qs == nil {
		qs = []quota.Quota{}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"quotas": qs})
}

// putQuota answers PUT /v1/admin/quotas/{tenant} (admin keys only).
func (h *Handler) putQuota(w http.ResponseWriter, r *http.Request) {
	if !h.adminOnly(w, r, "", "") {
		return
	}
	tenant := chi.URLParam(r, "tenant")
	if !wire.TenantValid(tenant) {
		refuse(w, httpx.ProblemValidation.Problem("the tenant must be "+wire.TenantRule))
		return
	}
	var body quotaBody
	if p := readJSON(w, r, &body); p != nil {
		refuse(w, *p)
		return
	}
	if body.Agent != "" && h.d.Submit != nil {
		if _, ok := h.d.Submit.Agent(body.Agent); !ok {
			refuse(w, httpx.ProblemAgentNotFound.Problem("no agent named "+body.Agent))
			return
		}
	}
	q := quota.Quota{
		Tenant: tenant, Agent: body.Agent, MaxRunning: body.MaxRunning, RatePerSecond: body.RatePerSecond,
		BudgetTokens: body.BudgetTokens, BudgetPeriod: body.BudgetPeriod,
	}
	if err := q.Check(); err != nil {
		refuse(w, httpx.ProblemValidation.Problem(err.Error()))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	stored, err := quota.NewStore(h.d.Pool).Put(ctx, q)
	if errors.Is(err, quota.ErrInvalid) {
		refuse(w, httpx.ProblemValidation.Problem(err.Error()))
		return
	}
	if err != nil {
		h.storeFault(w, r, "storing the quota", err)
		return
	}
	h.record(r, "quota.put", tenant+"/"+body.Agent, body, "ok", "")
	httpx.WriteJSON(w, http.StatusOK, stored)
}

// deleteQuota answers DELETE /v1/admin/quotas/{tenant}?agent= (admin keys only).
func (h *Handler) deleteQuota(w http.ResponseWriter, r *http.Request) {
	if !h.adminOnly(w, r, "", "") {
		return
	}
	tenant, agent := chi.URLParam(r, "tenant"), r.URL.Query().Get("agent")
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	found, err := quota.NewStore(h.d.Pool).Delete(ctx, tenant, agent)
	if err != nil {
		h.storeFault(w, r, "deleting the quota", err)
		return
	}
	if !found {
		refuse(w, httpx.ProblemNotFound.Problem("no quota for "+tenant+" and agent "+agent))
		return
	}
	h.record(r, "quota.delete", tenant+"/"+agent, nil, "ok", "")
	w.WriteHeader(http.StatusNoContent)
}

// usage answers GET /v1/admin/usage?tenant=&agent=&from=&to=: token usage per tenant, agent, UTC
// day and model (a tenant's key sees its own). from and to are days (YYYY-MM-DD), inclusive.
func (h *Handler) usage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := quota.UsageFilter{Tenant: scope(r), Agent: q.Get("agent")}
	if f.Tenant == "" {
		f.Tenant = q.Get("tenant")
	}
	for _, d := range []struct {
		name string
		to   *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := q.Get(d.name); v != "" {
			t, err := time.Parse(time.DateOnly, v)
			if err != nil {
				refuse(w, httpx.ProblemValidation.Problem(d.name+" must be a day, YYYY-MM-DD"))
				return
			}
			*d.to = t
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	rows, err := quota.NewStore(h.d.Pool).UsageRows(ctx, f)
	if err != nil {
		h.storeFault(w, r, "reading token usage", err)
		return
	}
	if rows == nil {
		rows = []quota.Usage{}
	}
	for i, u := range rows {
		if p, ok := h.cfg.Prices[u.Model]; ok {
			cost := (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output) / 1000
			rows[i].Cost = &cost
		}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"usage": rows})
}
