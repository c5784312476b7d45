// Keeps the status page current without reloading it: every 2 s it reads /status.json
// and writes each value into the element of the same key (data-k). When what is shown
// changes (a camera comes up or goes down, a reload changes the regions), the layout hash
// differs and the page's tiles are fetched again and swapped in. Pictures are fetched
// only while their tile is on screen, and only for a frame not yet shown.
"use strict";
(function () {
  const PERIOD_MS = 2000;
  const main = document.getElementById("cameras");
  const summary = document.getElementById("summary");
  if (!main || !summary || !window.fetch) return;
  const visible = new Set();
  let observer = null;
  if ("IntersectionObserver" in window) {
    observer = new IntersectionObserver((entries) => {
      for (const e of entries) {
        if (e.isIntersecting) {
          visible.add(e.target);
          refreshPictures(e.target);
        } else {
          visible.delete(e.target);
        }
      }
    });
  }

  function observeTiles() {
    visible.clear();
    for (const tile of main.querySelectorAll("article.tile")) {
      for (const img of tile.querySelectorAll("img[data-picture]")) {
        img.dataset.frame = tile.dataset.sequence;
      }
      if (observer) observer.observe(tile);
      else visible.add(tile);
    }
  }

  // Each picture of a visible tile that shows an older frame than the tile's newest, and
  // is not still loading, is asked for again (its URL names the frame).
  function refreshPictures(tile) {
    const seq = tile.dataset.sequence;
    if (!seq) return;
    for (const img of tile.querySelectorAll("img[data-picture]")) {
      if (img.dataset.frame === seq || !img.complete) continue;
      img.dataset.frame = seq;
      const url = new URL(img.src, location.href);
      url.searchParams.set("frame", seq);
      img.src = url.pathname + url.search;
    }
  }

  function setValue(el, key, text, cls) {
    if (el.textContent !== text) el.textContent = text;
    const want = [key === "badge" ? "badge" : "", cls].filter(Boolean).join(" ");
    if (el.className !== want) el.className = want;
    if (key === "reason") el.parentElement.hidden = text === "";
  }

  function apply(data) {
    summary.textContent = data.summary;
    summary.className = "summary " + data.summary_class;
    document.title = "edgesight: " + data.summary;
    for (const cam of data.cameras) {
      const tile = main.querySelector('article[data-camera="' + CSS.escape(cam.name) + '"]');
      if (!tile) continue;
      for (const [key, [text, cls]] of Object.entries(cam.values)) {
        const el = tile.querySelector('[data-k="' + CSS.escape(key) + '"]');
        if (el) setValue(el, key, text, cls);
      }
      tile.className = "tile " + cam.values.badge[1];
      if (cam.sequence !== null) tile.dataset.sequence = String(cam.sequence);
      if (visible.has(tile)) refreshPictures(tile);
    }
    document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
  }

  async function relayout() {
    const response = await fetch("/", { cache: "no-store" });
    if (!response.ok) throw new Error("/ answered " + response.status);
    const doc = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = doc.getElementById("cameras");
    if (!fresh) throw new Error("/ has no tiles");
    if (observer) observer.disconnect();
    main.replaceChildren(...fresh.childNodes);
    main.dataset.layout = fresh.dataset.layout;
    observeTiles();
  }

  async function tick() {
    if (document.visibilityState === "hidden") return;
    try {
      const response = await fetch("/status.json", { cache: "no-store" });
      if (!response.ok) throw new Error("/status.json answered " + response.status);
      const data = await response.json();
      if (data.layout !== main.dataset.layout) await relayout();
      apply(data);
    } catch (e) {
      summary.textContent = "no answer from edgesight (" + e.message + "); trying again";
      summary.className = "summary tampered";
    }
  }

  async function loop() {
    await tick();
    setTimeout(loop, PERIOD_MS);
  }
  observeTiles();
  setTimeout(loop, PERIOD_MS);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") tick();
  });
})();
