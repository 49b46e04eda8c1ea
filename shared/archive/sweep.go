package archive

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// DefaultOrphanMinAge is Config.OrphanMinAge: an object no committed
// batch owns is swept once it is this old. The archiver Lambda runs for
// at most 300 s and a batch's transaction dies after 5 minutes idle, so an
// hour is far more than twice the longest an upload can wait for its
// commit.
const DefaultOrphanMinAge = time.Hour

// DefaultPendingGrace: the sweep of the manifest takes a pending row no
// transaction holds for an orphan only once it was recorded longer ago
// than this, by the clock. A live batch records its row and then locks it;
// between the two (milliseconds, longer if the process stalls) the row is
// unlocked but not orphaned. Far longer than those milliseconds, far
// shorter than the next run.
const DefaultPendingGrace = 30 * time.Second

// keyRange parses a key the archiver writes (see objectKey): its source
// and the range of event ids its batch spanned. ok=false for any other key
// under the prefix, which the sweeps never touch.
func (a *Archiver) keyRange(key string) (source string, lo, hi int64, ok bool) {
	rest := key
	if a.cfg.Prefix != "" {
		if rest, ok = strings.CutPrefix(rest, a.cfg.Prefix+"/"); !ok {
			return "", 0, 0, false
		}
	}
	rest, ok = strings.CutPrefix(rest, "provider=")
	if !ok {
		return "", 0, 0, false
	}
	source, rest, ok = strings.Cut(rest, "/dt=")
	if !ok || source == "" || strings.Contains(source, "/") {
		return "", 0, 0, false
	}
	dt, name, ok := strings.Cut(rest, "/")
	if _, err := time.Parse(time.DateOnly, dt); !ok || err != nil {
		return "", 0, 0, false
	}
	ids, ok := strings.CutSuffix(name, ".jsonl.gz")
	if !ok {
		return "", 0, 0, false
	}
	l, h, ok := strings.Cut(ids, "-")
	lo, err1 := strconv.ParseInt(l, 10, 64)
	hi, err2 := strconv.ParseInt(h, 10, 64)
	if !ok || err1 != nil || err2 != nil || lo > hi {
		return "", 0, 0, false
	}
	return source, lo, hi, true
}

// listPrefix is what the sweeps list: the archive's keys, and only them.
func (a *Archiver) listPrefix() string {
	if a.cfg.Prefix == "" {
		return "provider="
	}
	return a.cfg.Prefix + "/provider="
}

// sweepListed deletes, at most limit, the objects that listing the bucket
// finds under the archive's prefix, that no committed batch owns, and
// that were stored more than OrphanMinAge ago: what an upload leaves when
// it lands after its batch died (its session ended, its pending row was
// swept), which the manifest no longer names. Younger objects are never
// touched, whatever the manifest says: an upload whose commit is pending
// is young.
func (a *Archiver) sweepListed(ctx context.Context, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	objs, err := a.blobs.List(ctx, a.listPrefix())
	if err != nil {
		return nil, storeError(err, "list archive objects for the orphan sweep")
	}
	cutoff := a.now().Add(-a.cfg.OrphanMinAge)
	sources := map[string]string{}
	var old []string
	for _, o := range objs {
		source, _, _, ok := a.keyRange(o.Key)
		if ok && !o.LastModified.IsZero() && !o.LastModified.After(cutoff) {
			old = append(old, o.Key)
			sources[o.Key] = source
		}
	}
	keys, err := a.uncommitted(ctx, old)
	if err != nil {
		return nil, err
	}
	var swept []string
	for _, key := range keys {
		if len(swept) >= limit {
			break
		}
		ok, _, err := a.sweepKey(ctx, key, sources[key], nil)
		if err != nil {
			return swept, err
		}
		if ok {
			a.log.Info("archive: unrecorded orphan object deleted", "key", key, "min_age", a.cfg.OrphanMinAge.String())
			swept = append(swept, key)
		}
	}
	return swept, nil
}

// uncommitted returns the keys no committed manifest row holds, in order.
func (a *Archiver) uncommitted(ctx context.Context, keys []string) ([]string, error) {
	const chunk = 1000
	committed := map[string]bool{}
	for i := 0; i < len(keys); i += chunk {
		c, err := a.store.ArchiveObjectListCommitted(ctx, keys[i:min(i+chunk, len(keys))])
		if err != nil {
			return nil, dbError(err, "sweep orphan archive objects")
		}
		for _, k := range c {
			committed[k] = true
		}
	}
	var out []string
	for _, k := range keys {
		if !committed[k] {
			out = append(out, k)
		}
	}
	return out, nil
}

// sweepKey deletes an object no committed batch owns, under its manifest
// row's lock: it records the key if no row does, locks the row without
// waiting, deletes the object and then the row, and commits. While the
// sweep holds the row no batch can lock the key, so none can upload to it
// or commit it; a batch that holds it is alive, and the object is left
// alone (ok=false). Without versions it deletes the current object (in a
// versioned bucket: a delete marker, the bytes kept as a noncurrent
// version until the lifecycle expires it); with versions (an expunge, the
// key's versions as listed) it deletes each of them for good, and returns
// how many.
func (a *Archiver) sweepKey(ctx context.Context, key, source string, versions []blobstore.Version) (ok bool, deleted int, err error) {
	tx, err := a.store.Begin(ctx)
	if err != nil {
		return false, 0, dbError(err, "sweep orphan archive objects")
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := tx.ArchiveObjectPrepare(ctx, key, source); err != nil {
		if errors.Is(err, storage.ErrArchiveObjectCommitted) {
			return false, 0, nil
		}
		return false, 0, dbError(err, "sweep orphan archive objects")
	}
	locked, err := tx.ArchiveObjectLockUnrecorded(ctx, key)
	if err != nil || !locked {
		return false, 0, dbErrorOrNil(err, "sweep orphan archive objects")
	}
	if versions == nil {
		if err := a.blobs.Delete(ctx, key); err != nil {
			return false, 0, storeError(err, "delete orphan archive object")
		}
	} else if deleted, err = a.deleteVersions(ctx, key, versions, true); err != nil {
		return false, deleted, err
	}
	if err := tx.ArchiveObjectDelete(ctx, key); err != nil {
		return false, deleted, dbError(err, "sweep orphan archive objects")
	}
	if err := tx.Commit(ctx); err != nil {
		return false, deleted, dbError(err, "sweep orphan archive objects")
	}
	return true, deleted, nil
}

// deleteVersions deletes the versions of key among vs for good: every one
// when current, else only the noncurrent ones (and noncurrent delete
// markers). A version without an id (an unversioned bucket) is the object
// itself, deleted plainly, and only when current. It returns how many it
// deleted.
func (a *Archiver) deleteVersions(ctx context.Context, key string, vs []blobstore.Version, current bool) (int, error) {
	n := 0
	for _, v := range vs {
		if v.Key != key || (v.IsLatest && !current) {
			continue
		}
		if v.VersionID == "" || v.VersionID == "null" {
			if !current {
				continue
			}
			if err := a.blobs.Delete(ctx, key); err != nil {
				return n, storeError(err, "delete archive object")
			}
		} else if err := a.blobs.DeleteVersion(ctx, key, v.VersionID); err != nil {
			return n, storeError(err, "delete archive object version")
		}
		n++
	}
	return n, nil
}

// copiesSwept is what sweepCopies deleted.
type copiesSwept struct {
	orphans  []string
	versions int
}

// sweepCopies deletes every copy of ev's body the bucket may hold besides
// its archive object's current version, for an expunge, which holds no
// lock on ev any more but has erased it, so no batch can take it again:
// among the objects (and their versions) of ev's source whose key's id
// range holds ev.ID, the noncurrent versions of each (the rewritten
// object's old bytes, an earlier upload at the same key), and every version
// of each object no committed batch owns (an orphan; swept under its
// manifest row's lock, like the sweep's). Nothing waits for an age: an
// orphan young or old can hold the body, and a batch alive at its key
// holds its manifest row (then only its noncurrent versions go).
func (a *Archiver) sweepCopies(ctx context.Context, source string, id int64) (copiesSwept, error) {
	var res copiesSwept
	vs, err := a.blobs.ListVersions(ctx, a.listPrefix()+source+"/")
	if err != nil {
		return res, storeError(err, "list archive object versions")
	}
	byKey := map[string][]blobstore.Version{}
	var keys []string
	for _, v := range vs {
		src, lo, hi, ok := a.keyRange(v.Key)
		if !ok || src != source || id < lo || id > hi {
			continue
		}
		if _, seen := byKey[v.Key]; !seen {
			keys = append(keys, v.Key)
		}
		byKey[v.Key] = append(byKey[v.Key], v)
	}
	orphans, err := a.uncommitted(ctx, keys)
	if err != nil {
		return res, err
	}
	orphan := map[string]bool{}
	for _, k := range orphans {
		orphan[k] = true
	}
	for _, key := range keys {
		if orphan[key] {
			ok, n, err := a.sweepKey(ctx, key, source, byKey[key])
			res.versions += n
			if err != nil {
				return res, err
			}
			if ok {
				res.orphans = append(res.orphans, key)
				continue
			}
		}
		n, err := a.deleteVersions(ctx, key, byKey[key], false)
		res.versions += n
		if err != nil {
			return res, err
		}
	}
	return res, nil
}
