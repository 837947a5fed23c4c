package agentryd

import (
	"errors"
	"os"

	"github.com/spf13/cobra"
)

// Environment variables of `agentryd dev temporal --postgres`: a DSN carries a
// password, which a flag would show to every user of `ps`.
const (
	envTemporalPostgresDSN           = "AGENTRY_TEMPORAL_POSTGRES_DSN"
	envTemporalPostgresVisibilityDSN = "AGENTRY_TEMPORAL_POSTGRES_VISIBILITY_DSN"
)

// postgresFlags are the flags that put `agentryd dev temporal` on PostgreSQL.
type postgresFlags struct {
	dsn, visibilityDSN string
	upgrade            bool
	shards             int
}

func (p *postgresFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&p.dsn, "postgres", "", "PostgreSQL DSN of Temporal's persistence database (default $"+envTemporalPostgresDSN+"); empty: SQLite in the workspace")
	f.StringVar(&p.visibilityDSN, "postgres-visibility", "", "DSN of the visibility database (default $"+envTemporalPostgresVisibilityDSN+", else the --postgres database name + \"_visibility\")")
	f.BoolVar(&p.upgrade, "upgrade-schema", false, "apply Temporal's schema updates to databases an older server set up (back them up first)")
	f.IntVar(&p.shards, "history-shards", 0, "history shards of a new cluster (default 4; fixed once created)")
}

// resolve fills the DSNs from the environment; nil when PostgreSQL is not asked for.
func (p *postgresFlags) resolve() (*postgresFlags, error) {
	out := *p
	if out.dsn == "" {
		out.dsn = os.Getenv(envTemporalPostgresDSN)
	}
	if out.visibilityDSN == "" {
		out.visibilityDSN = os.Getenv(envTemporalPostgresVisibilityDSN)
	}
	if out.dsn == "" {
		if out.visibilityDSN != "" || out.upgrade || out.shards != 0 {
			return nil, errors.New("--postgres-visibility, --upgrade-schema and --history-shards need --postgres (or " + envTemporalPostgresDSN + ")")
		}
		return nil, nil
	}
	return &out, nil
}
