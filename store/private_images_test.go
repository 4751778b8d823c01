package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 45) A private image: imported from one's own volume by a node of
// its region, usable once that node says it is ready, in its region
// only and by its owner only, billed per started GiB-hour, and deleted
// only when nothing uses it — its region's nodes told to remove it.
func TestPrivateImageFromAVolume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	v, err := db.CreateVolume(ctx, u, gpuportal.VolumeRequest{Name: "data", Region: "cd-1", SizeGiB: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		req  gpuportal.ImageImport
		code string
	}{
		{gpuportal.ImageImport{Name: "env", VolumeID: v.ID, Path: "../etc/shadow"}, gpuportal.EINVALID},
		{gpuportal.ImageImport{Name: "env", VolumeID: v.ID, Path: ""}, gpuportal.EINVALID},
		{gpuportal.ImageImport{Name: "", VolumeID: v.ID, Path: "env.tar"}, gpuportal.EINVALID},
	} {
		if _, err := db.ImportImage(ctx, u, bad.req); gpuportal.ErrorCode(err) != bad.code {
			t.Errorf("import %+v: %v", bad.req, err)
		}
	}
	if _, err := db.ImportImage(ctx, other, gpuportal.ImageImport{Name: "env", VolumeID: v.ID, Path: "env.tar"}); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("an import from another's volume: %v", err)
	}
	im, err := db.ImportImage(ctx, u, gpuportal.ImageImport{Name: "env", VolumeID: v.ID, Path: "images/env.tar"})
	if err != nil {
		t.Fatal(err)
	}
	if im.Status != gpuportal.ImageSaving || im.Owner != "me" || im.Region != "cd-1" || im.ID != "img-1" {
		t.Fatalf("new image = %+v", im)
	}
	launch := func(who *gpuportal.User, image string) (*gpuportal.Instance, error) {
		return db.Launch(ctx, who, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "true", Image: image})
	}
	if _, err := launch(u, im.ID); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("a launch of a saving image: %v", err)
	}
	nodes, _ := db.Nodes(ctx)
	imports, _, err := db.ImageOrders(ctx, nodes[0].ID)
	if err != nil || len(imports) != 1 || imports[0].VolumeID != v.ID || imports[0].Path != "images/env.tar" || imports[0].ImageID != 1 {
		t.Fatalf("the node is told %+v (%v)", imports, err)
	}
	// A report from a node that was not given it changes nothing.
	if err := db.RecordImageReports(ctx, "someone-else", []gpuportal.ImageReport{{ImageID: 1, Status: gpuportal.ImageReady, SizeBytes: 1}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.PrivateImage(ctx, u, im.ID); got.Status != gpuportal.ImageSaving {
		t.Fatalf("another node's report made it %s", got.Status)
	}
	if err := db.RecordImageReports(ctx, nodes[0].ID, []gpuportal.ImageReport{{ImageID: 1, Status: gpuportal.ImageReady, SizeBytes: 5<<30 + 1}}); err != nil {
		t.Fatal(err)
	}
	if imports, _, _ := db.ImageOrders(ctx, nodes[0].ID); len(imports) != 0 {
		t.Fatalf("a reported import is still ordered: %+v", imports)
	}
	if _, err := db.PrivateImage(ctx, other, im.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("another's GET: %v", err)
	}
	if list, _ := db.ImagesFor(ctx, other); len(list) != 2 {
		t.Errorf("another customer sees %d images, want the catalog's 2", len(list))
	}
	if _, err := launch(other, im.ID); gpuportal.ErrorCode(err) != gpuportal.EINVALID {
		t.Errorf("another's launch of it: %v", err)
	}
	inst, err := launch(u, im.ID)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Image != im.Reference || !strings.HasPrefix(im.Reference, "localhost/gpuportal-private/img-1:") {
		t.Errorf("the instance runs %q", inst.Image)
	}
	tick(t, db, clock, clock.Now())
	placed := getInstance(t, db, inst.ID)
	if d, _ := db.DesiredFor(ctx, placed.Node); len(d.Workloads) != 1 || d.Workloads[0].ImageArchive != "private/img-1.tar" {
		t.Fatalf("the node is told %+v", d.Workloads)
	}
	if err := db.DeletePrivateImage(ctx, u, im.ID); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("delete while an instance runs it: %v", err)
	}
	// 6 GiB (5 GiB and a byte, rounded up) at 30 fen a GiB-month is 180
	// fen a month: a quarter of a fen an hour, 6 fen a day.
	at := clock.Now()
	for h := 1; h <= 24; h++ {
		tick(t, db, clock, at.Add(time.Duration(h)*time.Hour))
	}
	if charged, _ := chargesOf(t, db, u.ID, gpuportal.LedgerImage); charged != 6 {
		t.Errorf("a day of a 6 GiB image cost %d fen, want 6", charged)
	}
	if _, err := db.Stop(ctx, u, inst.ID); err != nil {
		t.Fatal(err)
	}
	(fakeAgent{t, db}).exit(getInstance(t, db, inst.ID))
	if err := db.DeletePrivateImage(ctx, other, im.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("another's delete: %v", err)
	}
	if err := db.DeletePrivateImage(ctx, u, im.ID); err != nil {
		t.Fatal(err)
	}
	if _, deleted, _ := db.ImageOrders(ctx, nodes[0].ID); len(deleted) != 1 || deleted[0] != 1 {
		t.Errorf("the region's node is told to remove %v", deleted)
	}
	if list, _ := db.ImagesFor(ctx, u); len(list) != 2 {
		t.Errorf("after the delete %d images are listed", len(list))
	}
	// A failed import says why.
	bad, _ := db.ImportImage(ctx, u, gpuportal.ImageImport{Name: "notes", VolumeID: v.ID, Path: "notes.txt"})
	if err := db.RecordImageReports(ctx, nodes[0].ID, []gpuportal.ImageReport{{ImageID: 2, Status: gpuportal.ImageFailed, Error: "the file is not a tar archive"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.PrivateImage(ctx, u, bad.ID); got.Status != gpuportal.ImageFailed || got.Error != "the file is not a tar archive" {
		t.Errorf("failed import = %+v", got)
	}
	checkLedger(t, db, u)
}
