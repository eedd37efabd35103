-- +goose Up
-- The LangGraph store (services/langgraph/internal/store): a tenant's items, each a JSON value
-- under a key in a namespace (a path of labels). expires_at is set for items put with a ttl;
-- an expired item is neither read nor listed, and is deleted by the tenant's next put.
CREATE TABLE langgraph_store (
    tenant      text        NOT NULL,
    namespace   text[]      NOT NULL,
    key         text        NOT NULL,
    value       jsonb       NOT NULL,
    ttl_minutes double precision,
    expires_at  timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, namespace, key)
);
CREATE INDEX langgraph_store_expires_idx ON langgraph_store (tenant, expires_at) WHERE expires_at IS NOT NULL;

-- +goose Down
DROP TABLE langgraph_store;
