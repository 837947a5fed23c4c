package config

// VectorConfig is the vector section: where knowledge bases keep their
// chunks and embeddings (internal/vector).
type VectorConfig struct {
	// Backend is embedded (tables on the gateway's SQLite database, no
	// server) or postgres (tables on the gateway's PostgreSQL database,
	// storage.backend: postgres; pgvector where installed). Empty: the
	// backend of the gateway's database (VectorBackend).
	Backend string `yaml:"backend,omitempty" env:"BACKEND"`
}

// Vector backends (vector.backend).
const (
	VectorEmbedded = "embedded"
	VectorPostgres = "postgres"
)

// VectorBackend is vector.backend with its default filled in: the backend
// of the gateway's own database (embedded on SQLite, postgres on
// PostgreSQL), so a PostgreSQL deployment without a vector section keeps
// starting.
func (c *Config) VectorBackend() string {
	switch {
	case c.Vector.Backend != "":
		return c.Vector.Backend
	case c.Storage.Backend == "postgres":
		return VectorPostgres
	}
	return VectorEmbedded
}

func validateVector(c *Config, bad func(key, format string, args ...any)) {
	switch c.VectorBackend() {
	case VectorEmbedded:
		if c.Storage.Backend == "postgres" {
			bad("vector.backend", "embedded keeps vectors on the gateway's SQLite database, but storage.backend is postgres; use vector.backend: postgres")
		}
	case VectorPostgres:
		if c.Storage.Backend != "postgres" {
			bad("vector.backend", "postgres keeps vectors on the gateway's PostgreSQL database; it needs storage.backend: postgres")
		}
	default:
		bad("vector.backend", "unknown backend %q (use embedded or postgres)", c.Vector.Backend)
	}
}
