package upstream

import (
	"math"
	"sort"
	"strings"
	"unicode"
)

// BM25 parameters (the usual ones) and the weight of each field of a tool's document: a word
// of the name counts three times, of the title twice, of the description and the parameter
// names once (BM25F by repetition).
const (
	bm25K1 = 1.2
	bm25B  = 0.75

	weightName, weightTitle, weightDesc, weightParam = 3, 2, 1, 1

	// minScoreShare: a tool scoring under this share of the best is left out: it shares only
	// words nearly every tool has (BM25 gives those almost nothing), which is noise, not a
	// match.
	minScoreShare = 0.1
	// maxDocTerms bounds the words one tool contributes (a description is at most
	// maxDescriptionBytes already).
	maxDocTerms = 4096
)

// ranked is one tool that matched a query, with its score.
type ranked struct {
	tool  *Tool
	score float64
}

// Document is what a query is matched against besides a bound tool's definition (a saved
// program, docs/design.md §23): its name, title, description and parameter names, weighted as
// a tool's are.
type Document struct {
	Name, Title, Description string
	Params                   []string
}

// Match returns the indexes of docs that match query as list_tools matches tools, best first
// (a tie in docs' order); none for a query without words.
func Match(query string, docs []Document) []int {
	var out []int
	for _, h := range score(docs, query) {
		out = append(out, h.doc)
	}
	return out
}

// rank scores tools against query by BM25 over the words of each tool's name, title,
// description and parameter names, and returns those that match, best first (a tie by name).
func rank(tools []*Tool, query string) []ranked {
	docs := make([]Document, len(tools))
	for i, t := range tools {
		docs[i] = Document{Name: t.Upstream, Params: t.Signature().Params}
		if t.Def != nil {
			docs[i].Title, docs[i].Description = t.Def.Title, t.Def.Description
		}
	}
	hits := score(docs, query)
	out := make([]ranked, len(hits))
	for i, h := range hits {
		out[i] = ranked{tools[h.doc], h.score}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].score != out[j].score {
			return out[i].score > out[j].score
		}
		return out[i].tool.Name < out[j].tool.Name
	})
	return out
}

// hit is one document that matched a query: its index and its BM25 score.
type hit struct {
	doc   int
	score float64
}

// score scores docs against query by BM25 (BM25F by repetition, by field weights) and returns
// those that match, best first, a tie in docs' order.
func score(docs []Document, query string) []hit {
	q := dedupe(terms(query))
	if len(q) == 0 {
		return nil
	}
	tfs := make([]map[string]int, len(docs))
	lens := make([]int, len(docs))
	df := map[string]int{}
	total := 0
	for i, d := range docs {
		tf := map[string]int{}
		add := func(text string, w int) {
			for _, term := range terms(text) {
				if lens[i] >= maxDocTerms {
					return
				}
				tf[term] += w
				lens[i] += w
			}
		}
		add(d.Name, weightName)
		add(d.Title, weightTitle)
		add(d.Description, weightDesc)
		for _, p := range d.Params {
			add(p, weightParam)
		}
		for term := range tf {
			df[term]++
		}
		tfs[i] = tf
		total += lens[i]
	}
	n := float64(len(docs))
	avg := float64(total) / math.Max(n, 1)
	if avg == 0 {
		avg = 1
	}
	var out []hit
	best := 0.0
	for i, tf := range tfs {
		s := 0.0
		for _, term := range q {
			f := float64(tf[term])
			if f == 0 {
				continue
			}
			d := float64(df[term])
			idf := math.Log(1 + (n-d+0.5)/(d+0.5))
			s += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(lens[i])/avg))
		}
		if s > 0 {
			out = append(out, hit{i, s})
			best = math.Max(best, s)
		}
	}
	kept := out[:0]
	for _, h := range out {
		if h.score >= best*minScoreShare {
			kept = append(kept, h)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].score > kept[j].score })
	return kept
}

// terms splits text into lowercase words (letters and digits; camelCase, snake_case and
// kebab-case split), each lightly stemmed so "refunding orders" meets "refund order".
func terms(text string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, stem(strings.ToLower(string(cur))))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && unicode.IsLower(prev) {
				flush() // camelCase
			}
			cur = append(cur, r)
		default:
			flush()
		}
		prev = r
	}
	flush()
	return out
}

// stem strips the common English endings: plural s/es/ies, -ing, -ed.
func stem(w string) string {
	switch {
	case len(w) > 5 && strings.HasSuffix(w, "ing"):
		return w[:len(w)-3]
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && strings.HasSuffix(w, "ed"):
		return w[:len(w)-2]
	case len(w) > 4 && (strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "sses")):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}

func dedupe(ws []string) []string {
	seen := map[string]bool{}
	out := ws[:0]
	for _, w := range ws {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}
