package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/turnstile-run/turnstile/pkg/openapi"
)

var (
	specOnce   sync.Once
	specRouter routers.Router
	specErr    error
)

// validating is an http.RoundTripper that checks every request it sends and every response it gets
// against the OpenAPI document; a mismatch is returned as the round trip's error.
type validating struct{ next http.RoundTripper }

// apiClient is the client the intake end-to-end tests use.
var apiClient = &http.Client{Transport: validating{http.DefaultTransport}}

func (v validating) RoundTrip(req *http.Request) (*http.Response, error) {
	specOnce.Do(func() {
		doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec)
		if err != nil {
			specErr = err
			return
		}
		doc.Servers = nil
		specRouter, specErr = legacy.NewRouter(doc)
	})
	if specErr != nil {
		return nil, specErr
	}
	route, params, err := specRouter.FindRoute(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s is not in the OpenAPI document: %w", req.Method, req.URL.Path, err)
	}
	var body []byte
	if req.Body != nil {
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{
		Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return nil, fmt.Errorf("request does not match the OpenAPI document: %w", err)
	}
	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode,
		Header: resp.Header, Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	out.SetBodyBytes(rb)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return nil, fmt.Errorf("response %d %s does not match the OpenAPI document: %w", resp.StatusCode, rb, err)
	}
	return resp, nil
}

// getValidated GETs url through apiClient and decodes a 200 body into into.
func getValidated(t *testing.T, url string, into any) int {
	t.Helper()
	resp, err := apiClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if into != nil && resp.StatusCode == http.StatusOK {
		if err := decodeJSON(resp.Body, into); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}
