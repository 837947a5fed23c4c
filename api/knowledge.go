package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/knowledge"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// KnowledgeFeature is knowledge bases (docs/knowledge.md), behind
// `agentry knowledge ...` and the console's knowledge page:
//
//	GET  /knowledge/bases                      every base with its status
//	GET  /knowledge/bases/{id}                 one base
//	GET  /knowledge/bases/{id}/documents       its documents with their status
//	POST /knowledge/bases/{id}/sources         add a source and index it (admin)
//	POST /knowledge/bases/{id}/reindex         index every source again (write)
//	POST /knowledge/bases/{id}/search          hybrid search (write: it embeds the query)
type KnowledgeFeature struct {
	Knowledge *knowledge.Service
}

// Register implements Feature.
func (f *KnowledgeFeature) Register(r fiber.Router) {
	r.Get("/knowledge/bases", f.list)
	r.Get("/knowledge/bases/:base_id", f.get)
	r.Get("/knowledge/bases/:base_id/documents", f.documents)
	r.Post("/knowledge/bases/:base_id/sources", f.addSource)
	r.Post("/knowledge/bases/:base_id/reindex", f.reindex)
	r.Post("/knowledge/bases/:base_id/search", f.search)
}

func (f *KnowledgeFeature) list(c *fiber.Ctx) error {
	bases, err := f.Knowledge.Bases(c.UserContext())
	if err != nil {
		return err
	}
	if bases == nil {
		bases = []knowledge.Base{}
	}
	return c.JSON(fiber.Map{"bases": bases, "count": len(bases)})
}

func (f *KnowledgeFeature) get(c *fiber.Ctx) error {
	b, err := f.Knowledge.Base(c.UserContext(), c.Params("base_id"))
	if err != nil {
		return err
	}
	return c.JSON(b)
}

func (f *KnowledgeFeature) documents(c *fiber.Ctx) error {
	docs, err := f.Knowledge.Documents(c.UserContext(), c.Params("base_id"))
	if err != nil {
		return err
	}
	if docs == nil {
		docs = []models.KnowledgeDocument{}
	}
	return c.JSON(fiber.Map{"documents": docs, "count": len(docs)})
}

func (f *KnowledgeFeature) addSource(c *fiber.Ctx) error {
	// A source makes the gateway read files of its workspace or fetch a
	// URL: admins only.
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	var req struct {
		Source string `json:"source"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	b, err := f.Knowledge.AddSource(c.UserContext(), c.Params("base_id"), req.Source)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(b)
}

func (f *KnowledgeFeature) reindex(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	n, err := f.Knowledge.Sync(c.UserContext(), c.Params("base_id"))
	if err != nil {
		return err
	}
	b, err := f.Knowledge.Base(c.UserContext(), c.Params("base_id"))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(fiber.Map{"base": b, "started": n})
}

func (f *KnowledgeFeature) search(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	var req struct {
		Query string `json:"query"`
		K     int    `json:"k"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.K < 0 || req.K > 50 {
		return badRequest("k must be between 1 and 50 (0: knowledge.top_k)")
	}
	p := Principal(c)
	res, err := f.Knowledge.Search(c.UserContext(), []string{c.Params("base_id")}, req.Query, req.K,
		llm.CallMeta{Subject: p.CostSubject(""), Source: llm.SourceEmbedding, Trigger: "knowledge_search", Interactive: true})
	if err != nil {
		return err
	}
	return c.JSON(res)
}
