// Package openapi is the client of the Agentry REST API generated from
// docs/openapi.yaml by oapi-codegen (types and a plain client; see
// config.yaml). Do not edit openapi.gen.go: change the document and run
// `make generate`. TestGeneratedCodeIsCurrent fails when they disagree.
//
// The CLI does not use this package directly but internal/apiclient, which
// adds the base URL, the API key, the {"error": ...} envelope, the bodies
// --json prints and the SSE streams.
package openapi

//go:generate go tool oapi-codegen -config config.yaml ../../../docs/openapi.yaml
