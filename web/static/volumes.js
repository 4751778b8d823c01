// The volume file manager's upload: each chosen file is PUT to the API as
// it is (streamed to the volume, no form encoding), with its progress in
// the page; the folder is listed again when all are in. Without
// JavaScript the form posts multipart to the same folder instead.
(function () {
  "use strict";
  var form = document.querySelector("form[data-volume-upload]");
  if (!form) return;
  var input = form.querySelector("input[type=file]");
  var bar = form.querySelector("progress");
  var status = form.querySelector("output");
  var csrf = document.querySelector('meta[name="csrf-token"]').content;

  function upload(file) {
    return new Promise(function (resolve, reject) {
      var dir = form.dataset.dir === "." ? "" : form.dataset.dir + "/";
      var xhr = new XMLHttpRequest();
      xhr.open("PUT", form.dataset.volumeUpload + "?path=" + encodeURIComponent(dir + file.name));
      xhr.setRequestHeader("X-CSRF-Token", csrf);
      xhr.setRequestHeader("Content-Type", "application/octet-stream");
      xhr.upload.onprogress = function (e) {
        if (e.lengthComputable) bar.value = Math.round((e.loaded / e.total) * 100);
      };
      xhr.onload = function () {
        if (xhr.status >= 200 && xhr.status < 300) return resolve();
        var msg = xhr.statusText;
        try { msg = JSON.parse(xhr.responseText).error.message; } catch (_) {}
        reject(new Error(file.name + ": " + msg));
      };
      xhr.onerror = function () { reject(new Error(file.name + ": the connection was lost")); };
      xhr.send(file);
    });
  }

  form.addEventListener("submit", function (evt) {
    if (!input.files.length) return;
    evt.preventDefault();
    var files = Array.prototype.slice.call(input.files);
    bar.hidden = false;
    var done = 0;
    var next = function () {
      if (done === files.length) {
        status.textContent = status.dataset.done || "✓";
        location.reload();
        return;
      }
      var f = files[done];
      status.textContent = f.name + " (" + (done + 1) + "/" + files.length + ")";
      bar.value = 0;
      upload(f).then(function () { done++; next(); }, function (err) {
        status.textContent = err.message;
        status.classList.add("error");
        status.setAttribute("data-failed", "true");
      });
    };
    next();
  });
})();
