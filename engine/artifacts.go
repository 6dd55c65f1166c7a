package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// ArtifactPolicy says whether files the program leaves in its workspace come back, and how
// many bytes of them at most.
type ArtifactPolicy struct {
	Collect  bool
	MaxFiles int   // default 64
	MaxBytes int64 // all files together; default 16 MiB
	// InlineBytes is the largest text artifact whose content comes back in the result itself
	// (outputs.Attachment.Text); default the Runner's PreviewBytes.
	InlineBytes int64
}

// ArtifactFile is the content of one collected artifact. It stays on the host: the caller
// keeps it (a blob store) and sets the attachment's handle and location.
type ArtifactFile struct {
	Name string
	Data []byte
}

// maxArtifactEntries bounds the walk, so a program that makes a million empty files costs
// the host a bounded amount of work.
const maxArtifactEntries = 10000

// collectArtifacts reads the regular files under dir (a workspace seen from the host) by
// workspace-relative path, in path order, within p's limits. It never follows a symlink:
// the walk goes through os.Root, so nothing resolves outside dir, every entry is checked
// with Lstat, and each file is opened with O_NOFOLLOW and checked again once open (a program
// still running could swap a file for something else in between).
func collectArtifacts(dir string, p ArtifactPolicy) ([]outputs.Attachment, []ArtifactFile, []OmittedFile) {
	if p.MaxFiles <= 0 {
		p.MaxFiles = 64
	}
	if p.MaxBytes <= 0 {
		p.MaxBytes = 16 << 20
	}
	atts, files, omitted := []outputs.Attachment{}, []ArtifactFile{}, []OmittedFile{}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return atts, files, append(omitted, OmittedFile{Path: ".", Reason: "the workspace could not be read after the program ended"})
	}
	defer root.Close()
	var remaining = p.MaxBytes
	visited := 0
	var walk func(rel string)
	walk = func(rel string) {
		d, err := root.Open(rel)
		if err != nil {
			omitted = append(omitted, OmittedFile{Path: rel, Reason: "unreadable directory"})
			return
		}
		entries, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			omitted = append(omitted, OmittedFile{Path: rel, Reason: "unreadable directory"})
			return
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
		for _, e := range entries {
			name := path.Join(rel, e.Name())
			if rel == "." {
				name = e.Name()
			}
			visited++
			if visited > maxArtifactEntries {
				if visited == maxArtifactEntries+1 {
					omitted = append(omitted, OmittedFile{Path: name, Reason: "the workspace has more than 10000 entries; the rest were not looked at"})
				}
				return
			}
			info, err := root.Lstat(name)
			if err != nil {
				omitted = append(omitted, OmittedFile{Path: name, Reason: "vanished while being collected"})
				continue
			}
			switch mode := info.Mode(); {
			case mode.IsDir():
				walk(name)
			case mode&fs.ModeSymlink != 0:
				omitted = append(omitted, OmittedFile{Path: name, Reason: "a symbolic link: links are never followed or collected"})
			case !mode.IsRegular():
				omitted = append(omitted, OmittedFile{Path: name, Reason: "not a regular file (" + kindOf(mode) + "): never collected"})
			case len(files) >= p.MaxFiles:
				omitted = append(omitted, OmittedFile{Path: name, Reason: "over artifacts.max_files"})
			case info.Size() > remaining:
				omitted = append(omitted, OmittedFile{Path: name, Reason: "over artifacts.max_bytes"})
			default:
				data, reason := readRegular(root, name, remaining)
				if reason != "" {
					omitted = append(omitted, OmittedFile{Path: name, Reason: reason})
					continue
				}
				remaining -= int64(len(data))
				files = append(files, ArtifactFile{Name: name, Data: data})
				atts = append(atts, inlineText(outputs.Attachment{Name: name, ContentType: contentType(name, data),
					Size: int64(len(data)), Location: "preview_only"}, data, p.InlineBytes))
			}
		}
	}
	walk(".")
	return atts, files, omitted
}

// collectArchive is collectArtifacts over a child's tar stream of its workspace
// (WorkspaceArchiver): the same rules, the same reasons, the same order (the archive lists
// each directory's entries sorted, as the walk does). Everything in the archive is the
// program's to shape, so nothing in it is trusted but as data: a name must be a clean
// relative path, a file's content is read within what remains of max_bytes, and the stream
// is read no further than the entries' bound.
func collectArchive(ctx context.Context, a WorkspaceArchiver, p ArtifactPolicy) ([]outputs.Attachment, []ArtifactFile, []OmittedFile) {
	if p.MaxFiles <= 0 {
		p.MaxFiles = 64
	}
	if p.MaxBytes <= 0 {
		p.MaxBytes = 16 << 20
	}
	atts, files, omitted := []outputs.Attachment{}, []ArtifactFile{}, []OmittedFile{}
	rc, err := a.WorkspaceArchive(ctx)
	if err != nil {
		return atts, files, append(omitted, OmittedFile{Path: ".", Reason: "the workspace could not be read after the program ended: " + err.Error()})
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	remaining := p.MaxBytes
	for visited := 1; ; visited++ {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return atts, files, append(omitted, OmittedFile{Path: ".", Reason: "the workspace's archive broke off: the rest was not looked at"})
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." || !fs.ValidPath(name) {
			continue
		}
		if visited > maxArtifactEntries {
			return atts, files, append(omitted, OmittedFile{Path: name, Reason: "the workspace has more than 10000 entries; the rest were not looked at"})
		}
		mode := h.FileInfo().Mode()
		switch {
		case mode.IsDir():
		case mode&fs.ModeSymlink != 0:
			omitted = append(omitted, OmittedFile{Path: name, Reason: "a symbolic link: links are never followed or collected"})
		case h.Typeflag == tar.TypeLink:
			omitted = append(omitted, OmittedFile{Path: name, Reason: "a second name of a file already listed (a hard link): collected once"})
		case !mode.IsRegular():
			omitted = append(omitted, OmittedFile{Path: name, Reason: "not a regular file (" + kindOf(mode) + "): never collected"})
		case len(files) >= p.MaxFiles:
			omitted = append(omitted, OmittedFile{Path: name, Reason: "over artifacts.max_files"})
		case h.Size > remaining:
			omitted = append(omitted, OmittedFile{Path: name, Reason: "over artifacts.max_bytes"})
		default:
			data, err := io.ReadAll(io.LimitReader(tr, remaining+1))
			if err != nil || int64(len(data)) != h.Size {
				omitted = append(omitted, OmittedFile{Path: name, Reason: "unreadable"})
				continue
			}
			remaining -= int64(len(data))
			files = append(files, ArtifactFile{Name: name, Data: data})
			atts = append(atts, inlineText(outputs.Attachment{Name: name, ContentType: contentType(name, data),
				Size: int64(len(data)), Location: "preview_only"}, data, p.InlineBytes))
		}
	}
	return atts, files, omitted
}

func readRegular(root *os.Root, name string, limit int64) ([]byte, string) {
	f, err := root.OpenFile(name, os.O_RDONLY|openArtifact, 0)
	if errors.Is(err, fs.ErrPermission) {
		// A program running as a uid of its own (a subordinate id) keeps a file of mode 0600
		// from the host, which is another uid to it.
		return nil, "not readable by the host: its mode keeps other users out (make it readable, e.g. mode 0644)"
	}
	if err != nil {
		return nil, "could not be opened without following a link"
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return nil, "changed into something other than a regular file while being collected"
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, "unreadable"
	}
	if int64(len(data)) > limit {
		return nil, "over artifacts.max_bytes"
	}
	return data, ""
}

// inlineText puts the content of a small text artifact (at most limit bytes of UTF-8 without
// NUL, of a textual content type) into the attachment itself, whole: location inline.
func inlineText(a outputs.Attachment, data []byte, limit int64) outputs.Attachment {
	if int64(len(data)) > limit || !isText(a.ContentType) || !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return a
	}
	text := string(data)
	a.Text, a.Location = &text, "inline"
	return a
}

// isText reports whether a content type is text a model can read.
func isText(ctype string) bool {
	mt, _, _ := strings.Cut(ctype, ";")
	mt = strings.TrimSpace(mt)
	switch {
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml", "application/toml",
		"application/javascript", "application/x-sh", "application/sql", "application/x-ndjson":
		return true
	}
	return false
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a fifo"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "special"
}

func contentType(name string, data []byte) string {
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
		return t
	}
	if utf8.Valid(data) && !strings.ContainsRune(string(data), 0) {
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}
