package config

import "errors"

// LangGraph store bounds' defaults.
const (
	LangGraphStoreItemsMaxDefault = 10000
	LangGraphStoreValueMaxDefault = 64 << 10
)

// LangGraphStoreSettings bound the langgraph role's store (tenant-scoped items in Postgres).
// Each field documents its variable and default; applyDefaults fills zero fields and validate
// reports every bound violated.
type LangGraphStoreSettings struct {
	// ItemsMax is the most store items one tenant may have; a new item past it is answered 409
	// store-items-limit (replacing an item is not new; expired items no longer count).
	// Defaults to 10000.
	ItemsMax int `env:"TURNSTILE_LANGGRAPH_STORE_ITEMS_MAX"`
	// ValueMax is the largest value of a store item, in bytes of its JSON; larger is answered 413
	// body-too-large. Defaults to 65536 (64 KiB).
	ValueMax int `env:"TURNSTILE_LANGGRAPH_STORE_VALUE_MAX"`
}

func (s *LangGraphStoreSettings) applyDefaults() {
	if s.ItemsMax == 0 {
		s.ItemsMax = LangGraphStoreItemsMaxDefault
	}
	if s.ValueMax == 0 {
		s.ValueMax = LangGraphStoreValueMaxDefault
	}
}

func (s LangGraphStoreSettings) validate() []error {
	var errs []error
	if s.ItemsMax < 1 {
		errs = append(errs, errors.New("TURNSTILE_LANGGRAPH_STORE_ITEMS_MAX: must be at least 1"))
	}
	if s.ValueMax < 2 || s.ValueMax > 1<<20 {
		errs = append(errs, errors.New("TURNSTILE_LANGGRAPH_STORE_VALUE_MAX: must be between 2 and 1048576 bytes"))
	}
	return errs
}
