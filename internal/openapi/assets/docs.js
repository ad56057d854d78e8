// Starts Swagger UI on /docs. Kept out of the page so that the page's
// Content-Security-Policy needs no inline scripts.
(function () {
  var el = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: el.getAttribute("data-spec-url"),
    domNode: el,
    deepLinking: true,
    persistAuthorization: true,
    displayRequestDuration: true,
    showExtensions: true,
    showCommonExtensions: true,
    defaultModelsExpandDepth: 1,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout"
  });
})();
