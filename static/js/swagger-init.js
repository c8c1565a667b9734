/* Start Swagger UI on /docs (the bundle is served from /docs-assets; no inline script, no CDN). */
(function () {
  "use strict";
  var el = document.getElementById("swagger-ui");
  if (!el || !window.SwaggerUIBundle) return;
  window.ui = window.SwaggerUIBundle({
    url: el.getAttribute("data-openapi-url") || "/openapi.json",
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null,  // never ask validator.swagger.io
    presets: [window.SwaggerUIBundle.presets.apis, window.SwaggerUIBundle.SwaggerUIStandalonePreset]
  });
})();
