package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// addShop adds, with --shop, a shop's two tools beside the others (apart, so no other test's
// listing or search changes):
//
//	order {order_id}            read-only (readOnlyHint): {order_id, amount}, the amount the
//	                            id's length times 10
//	refund {order_id, amount}   destructive, with an output schema {refunded, order_id,
//	                            amount}: what a rehearsal's stand-in is shaped by
//
// Both count their real calls (the counter tool reads them).
func addShop(s *server.MCPServer, c *counter) {
	s.AddTool(mcp.NewTool("order", mcp.WithDescription("Reads an order: its id and amount."), mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false), mcp.WithString("order_id", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			c.inc("order")
			id := req.GetString("order_id", "")
			return mcp.NewToolResultStructuredOnly(map[string]any{"order_id": id, "amount": 10 * len(id)}), nil
		})
	s.AddTool(mcp.NewTool("refund", mcp.WithDescription("Pays an order's amount back to its customer."), mcp.WithDestructiveHintAnnotation(true),
		mcp.WithString("order_id", mcp.Required()), mcp.WithNumber("amount", mcp.Required()),
		mcp.WithRawOutputSchema(json.RawMessage(`{"type":"object","properties":{"refunded":{"type":"boolean"},"order_id":{"type":"string"},"amount":{"type":"number"}},"required":["refunded","order_id","amount"]}`))),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			c.inc("refund")
			id, amount := req.GetString("order_id", ""), req.GetFloat("amount", 0)
			return mcp.NewToolResultStructured(map[string]any{"refunded": true, "order_id": id, "amount": amount},
				fmt.Sprintf("refunded %g on %s", amount, id)), nil
		})
}
