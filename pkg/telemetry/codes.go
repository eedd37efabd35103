package telemetry

import otelcodes "go.opentelemetry.io/otel/codes"

const codesError = otelcodes.Error

func codes(err error) (otelcodes.Code, string) { return otelcodes.Error, err.Error() }
