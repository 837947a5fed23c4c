package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/builder"
)

// BuilderFeature drafts and saves agents with a model (docs/builder.md):
//
//	POST /builder/generate   a description in, a complete definition out
//	POST /builder/refine     a definition and an instruction in, the changed definition and its diff out
//	POST /builder/build      validate, run the suite, save the agent (enabled or disabled)
//	POST /builder/try        one message to a draft before it is saved (nothing saved)
//
// Each request is its own accounting run under llm.studio's per-build
// allowance (ledger source builder).
type BuilderFeature struct {
	Builder *builder.Service
}

// Register implements Feature.
func (f *BuilderFeature) Register(r fiber.Router) {
	r.Post("/builder/generate", f.generate)
	r.Post("/builder/refine", f.refine)
	r.Post("/builder/build", f.build)
	r.Post("/builder/try", f.try)
}

type builderModel struct {
	Provider string `json:"provider" maxlen:"128"`
	Model    string `json:"model" maxlen:"256"`
}

type generateBody struct {
	Description string       `json:"description"`
	ID          string       `json:"id" maxlen:"63"`
	Builder     builderModel `json:"builder"`
}

type refineBody struct {
	Definition  string       `json:"definition"`
	Instruction string       `json:"instruction"`
	Builder     builderModel `json:"builder"`
}

type buildBody struct {
	Definition string             `json:"definition"`
	Enabled    bool               `json:"enabled"`
	Overwrite  bool               `json:"overwrite"`
	Evals      *builder.EvalSuite `json:"evals"`
}

func builderWho(c *fiber.Ctx) builder.Who {
	if p := auth.FromContext(c.UserContext()); p != nil {
		return builder.Who{Subject: p.Subject}
	}
	return builder.Who{}
}

func (f *BuilderFeature) generate(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	var b generateBody
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	d, err := f.Builder.Generate(c.UserContext(), builder.GenerateRequest{Description: b.Description, ID: b.ID,
		Model: builder.Model{Provider: b.Builder.Provider, Model: b.Builder.Model}, Who: builderWho(c)})
	if err != nil {
		return err
	}
	return c.JSON(d)
}

func (f *BuilderFeature) refine(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	var b refineBody
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	d, err := f.Builder.Refine(c.UserContext(), builder.RefineRequest{Definition: b.Definition, Instruction: b.Instruction,
		Model: builder.Model{Provider: b.Builder.Provider, Model: b.Builder.Model}, Who: builderWho(c)})
	if err != nil {
		return err
	}
	return c.JSON(d)
}

func (f *BuilderFeature) build(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	var b buildBody
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	res, err := f.Builder.Build(c.UserContext(), builder.BuildRequest{Definition: b.Definition, Enabled: b.Enabled,
		Overwrite: b.Overwrite, Evals: b.Evals, Who: builderWho(c)})
	if err != nil {
		if tooMany := definitionError(err); tooMany != nil {
			return tooMany
		}
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(res)
}

type tryBody struct {
	Definition string `json:"definition"`
	Text       string `json:"text"`
}

func (f *BuilderFeature) try(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	var b tryBody
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	res, err := f.Builder.Try(c.UserContext(), builder.TryRequest{Definition: b.Definition, Text: b.Text, Who: builderWho(c)})
	if err != nil {
		return err
	}
	return c.JSON(res)
}
