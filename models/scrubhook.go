package models

import (
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// scrubbedColumns hold text that may quote the outside world (a provider's
// error, a webhook receiver's answer, an event's payload): the last line of
// defence that keeps secrets out of the database files whatever path the text
// took.
var scrubbedColumns = map[string]bool{"error": true, "last_error": true, "payload": true}

// registerScrub installs create and update callbacks that pass the values of
// scrubbedColumns through fn (the gateway passes scrub.Auto; models does not
// know which values are secret).
func registerScrub(db *gorm.DB, fn func(string) string) error {
	if fn == nil {
		return nil
	}
	hook := func(tx *gorm.DB) { scrubStatement(tx.Statement, fn) }
	if err := db.Callback().Create().Before("gorm:create").Register("agentry:scrub_create", hook); err != nil {
		return err
	}
	return db.Callback().Update().Before("gorm:update").Register("agentry:scrub_update", hook)
}

func scrubStatement(st *gorm.Statement, fn func(string) string) {
	switch dest := st.Dest.(type) {
	case map[string]any:
		scrubMap(dest, fn)
	case *map[string]any:
		scrubMap(*dest, fn)
	default:
		if st.Schema != nil && st.ReflectValue.IsValid() {
			scrubStruct(st, fn)
		}
	}
	if c, ok := st.Clauses["ON CONFLICT"]; ok {
		if oc, ok := c.Expression.(clause.OnConflict); ok {
			for i, a := range oc.DoUpdates {
				if s, isStr := a.Value.(string); isStr && scrubbedColumns[a.Column.Name] {
					oc.DoUpdates[i].Value = fn(s)
				}
			}
		}
	}
}

func scrubMap(m map[string]any, fn func(string) string) {
	for k, v := range m {
		if s, ok := v.(string); ok && scrubbedColumns[k] {
			m[k] = fn(s)
		}
	}
}

func scrubStruct(st *gorm.Statement, fn func(string) string) {
	for _, f := range st.Schema.Fields {
		if !scrubbedColumns[f.DBName] || f.FieldType.Kind() != reflect.String {
			continue
		}
		rv := st.ReflectValue
		switch rv.Kind() {
		case reflect.Slice, reflect.Array:
			for i := 0; i < rv.Len(); i++ {
				scrubField(st, f.DBName, rv.Index(i), fn)
			}
		case reflect.Struct:
			scrubField(st, f.DBName, rv, fn)
		}
	}
}

func scrubField(st *gorm.Statement, column string, rv reflect.Value, fn func(string) string) {
	f := st.Schema.LookUpField(column)
	v, zero := f.ValueOf(st.Context, rv)
	if zero {
		return
	}
	if s, ok := v.(string); ok {
		if clean := fn(s); clean != s {
			_ = f.Set(st.Context, rv, clean)
		}
	}
}
